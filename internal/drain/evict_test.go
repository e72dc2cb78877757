package drain

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRefusedForGood(t *testing.T) {
	status := func(code int32) error {
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code}}
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{name: "no status: connection refused", err: errors.New("connection refused"), want: false},
		{name: "404 gone", err: status(http.StatusNotFound), want: false},
		{name: "408 timeout", err: status(http.StatusRequestTimeout), want: false},
		{name: "409 conflict", err: status(http.StatusConflict), want: false},
		{name: "429 budget", err: status(http.StatusTooManyRequests), want: false},
		{name: "500", err: status(http.StatusInternalServerError), want: false},
		{name: "503", err: status(http.StatusServiceUnavailable), want: false},
		{name: "400", err: status(http.StatusBadRequest), want: true},
		{name: "403 admission webhook", err: status(http.StatusForbidden), want: true},
		{name: "422", err: status(http.StatusUnprocessableEntity), want: true},
		{name: "403 wrapped", err: fmt.Errorf("evicting: %w", status(http.StatusForbidden)), want: true},
		{name: "429 wrapped", err: fmt.Errorf("evicting: %w", status(http.StatusTooManyRequests)), want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RefusedForGood(tc.err); got != tc.want {
				t.Errorf("RefusedForGood(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
