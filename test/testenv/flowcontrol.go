package testenv

import (
	"context"
	"fmt"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// WaitFlowSchemasInUse waits until API Priority and Fairness reports each
// named FlowSchema not dangling (its priority level exists and is in use).
// A FlowSchema created before its level is dangling until the level is
// seen, so a dangling one is waited on, not failed at once; the error after
// timeout names the last condition seen.
func WaitFlowSchemasInUse(ctx context.Context, client kubernetes.Interface, names []string, timeout time.Duration) error {
	for _, name := range names {
		last := "no Dangling condition yet"
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			fs, err := client.FlowcontrolV1().FlowSchemas().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range fs.Status.Conditions {
				if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
					last = fmt.Sprintf("Dangling=%s: %s", c.Status, c.Message)
					return c.Status == flowcontrolv1.ConditionFalse, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("FlowSchema %s not in use by API Priority and Fairness within %v (%s): %w", name, timeout, last, err)
		}
	}
	return nil
}
