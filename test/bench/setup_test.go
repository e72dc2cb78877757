package bench

import (
	"testing"

	"lifeboat.dev/lifeboat/test/testenv"
)

// testbed starts what every benchmark here needs: the Kubernetes testbed
// with opts, moto, and the lifeboat binary, all torn down with b. It returns
// them with b's temporary directory (for process logs).
func testbed(b *testing.B, opts testenv.Options) (env *testenv.Env, moto *testenv.Moto, bin, dir string) {
	b.Helper()
	dir = b.TempDir()
	env = testenv.Start(b, opts)
	moto = testenv.StartMoto(b, dir)
	bin, err := testenv.BuildLifeboat(dir)
	if err != nil {
		b.Fatal(err)
	}
	return env, moto, bin, dir
}
