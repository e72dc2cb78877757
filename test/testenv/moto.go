package testenv

import (
	"context"
	_ "embed"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awscreds "github.com/aws/aws-sdk-go-v2/credentials"
)

// Moto is a running moto_server: SQS, EC2, EventBridge and STS on one endpoint.
type Moto struct {
	Endpoint string
	Proc     *Process
}

// motoServerPy starts moto's server with its EventBridge delivery made
// fast (see the file).
//
//go:embed motoserver.py
var motoServerPy string

// motoCommand returns how to start moto's server: motoserver.py under the
// python3 on PATH when that Python has moto (the machine image's, through
// pyenv's shims), else moto_server itself, which behaves the same but
// delivers EventBridge events ~15 times slower.
func motoCommand() (bin string, args []string, err error) {
	if py, err := exec.LookPath("python3"); err == nil {
		if exec.Command(py, "-c", "import moto.server, jsonpath_ng.ext").Run() == nil {
			return py, []string{"-c", motoServerPy}, nil
		}
	}
	p, err := exec.LookPath("moto_server")
	if err != nil {
		return "", nil, fmt.Errorf("testbed component moto_server (moto 5.x) is not on PATH: install it with `pip install 'moto[server]>=5,<6'`")
	}
	fmt.Fprintln(os.Stderr, "testenv: python3 on PATH cannot import moto; starting moto_server as is (slow EventBridge delivery)")
	return p, nil, nil
}

// StartMoto starts moto_server on a free loopback port; it is stopped when
// t's cleanup runs. logDir holds its log.
func StartMoto(t testing.TB, logDir string) *Moto {
	t.Helper()
	m, err := startMoto(logDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Proc.Stop)
	dumpOnFailure(t, m.Proc)
	return m
}

func startMoto(logDir string, pick PortPicker) (*Moto, error) {
	bin, args, err := motoCommand()
	if err != nil {
		return nil, err
	}
	return startMotoCommand(logDir, pick, bin, args)
}

// startMotoCommand starts moto's server as bin args on a free port.
func startMotoCommand(logDir string, pick PortPicker, bin string, args []string) (*Moto, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m := &Moto{}
	_, _, err := StartOnFreePorts(ctx, "moto", 1, pick, func(ctx context.Context, attempt int, ports []int) (*Process, error) {
		p, err := startAttempt("moto", attempt, bin, append(args, "-H", "127.0.0.1", "-p", fmt.Sprint(ports[0])), nil, logDir)
		if err != nil {
			return nil, err
		}
		m.Endpoint, m.Proc = fmt.Sprintf("http://127.0.0.1:%d", ports[0]), p
		if err := WaitHTTP(ctx, p, nil, m.Endpoint+"/moto-api/"); err != nil {
			p.Stop()
			return p, fmt.Errorf("moto_server did not start: %w", err)
		}
		return p, nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Reset clears all of moto's state (POST /moto-api/reset).
func (m *Moto) Reset(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.Endpoint+"/moto-api/reset", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("resetting moto: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("resetting moto: status %d", resp.StatusCode)
	}
	return nil
}

// AWSEnv returns environment variables that point the AWS SDK's default
// chain at fake credentials, so no real account is ever reached.
func AWSEnv() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing",
		"AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true",
	}
}

// SetAWSEnv sets AWSEnv in the test process (for in-process SDK clients).
func SetAWSEnv(t testing.TB) {
	for _, kv := range AWSEnv() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// NewMoto starts moto_server outside a test (TestMain); the caller stops
// m.Proc.
func NewMoto(logDir string) (*Moto, error) { return startMoto(logDir, nil) }

// MotoAWSConfig is an AWS SDK configuration with static fake credentials in
// us-east-1, moto's default region; set BaseEndpoint per client.
func MotoAWSConfig() aws.Config {
	return aws.Config{
		Region:      "us-east-1",
		Credentials: awscreds.NewStaticCredentialsProvider("testing", "testing", ""),
	}
}
