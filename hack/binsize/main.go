// Command binsize prints where the bytes of a Go binary go, summed by
// package and by module: the symbol sizes of `go tool nm -size` (code,
// read-only data, type data; not bss, which takes no room in the file, nor
// the pclntab, which grows with the code). Run it on a
// binary built without -s -w (the symbols are needed); the stripped
// binary is the same code without them.
//
//	CGO_ENABLED=0 go build -trimpath -o /tmp/lifeboat.sym ./cmd/lifeboat
//	go run ./hack/binsize /tmp/lifeboat.sym            # top 40 packages and modules
//	go run ./hack/binsize -n 100 /tmp/lifeboat.sym
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"debug/elf"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

func main() {
	n := flag.Int("n", 40, "rows to print per table")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: binsize [-n rows] BINARY")
		os.Exit(2)
	}
	out, err := exec.Command("go", "tool", "nm", "-size", flag.Arg(0)).Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "binsize: go tool nm:", err)
		os.Exit(1)
	}
	zero, err := zeroed(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "binsize:", err)
		os.Exit(1)
	}
	pkgs := map[string]int64{}
	var total int64
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		// address size type name
		f := strings.Fields(sc.Text())
		if len(f) < 4 {
			continue
		}
		size, err := strconv.ParseInt(f[1], 10, 64)
		addr, aerr := strconv.ParseUint(f[0], 16, 64)
		if err != nil || aerr != nil || size == 0 || zero(addr) {
			continue // zeroed memory (bss) takes no room in the file
		}
		pkgs[packageOf(strings.Join(f[3:], " "))] += size
		total += size
	}
	mods := map[string]int64{}
	for p, s := range pkgs {
		mods[moduleOf(p)] += s
	}
	fmt.Printf("symbols total: %.1f MB\n\n", mb(total))
	print("package", pkgs, *n)
	fmt.Println()
	print("module (or group)", mods, *n)
}

// zeroed reports whether an address is in a section that takes no room in
// the file (.bss, .noptrbss: e.g. the FIPS DRBG's 32 MiB, untouched until
// used).
func zeroed(path string) (func(uint64) bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var secs []*elf.Section
	for _, s := range f.Sections {
		if s.Type == elf.SHT_NOBITS {
			secs = append(secs, s)
		}
	}
	return func(a uint64) bool {
		for _, s := range secs {
			if a >= s.Addr && a < s.Addr+s.Size {
				return true
			}
		}
		return false
	}, nil
}

// packageOf returns the package of a symbol: the name up to the first dot
// after the last slash, without the type./go: prefixes of the linker's
// own symbols.
func packageOf(sym string) string {
	for _, p := range []string{"type:.eq.", "type:.hash.", "type:", "go:itab.", "go:"} {
		if strings.HasPrefix(sym, p) {
			sym = strings.TrimPrefix(sym, p)
			if p == "go:" {
				return "go:" + strings.SplitN(sym, ".", 2)[0]
			}
			break
		}
	}
	sym = strings.TrimLeft(sym, "*[]")
	slash := strings.LastIndex(sym, "/")
	dot := strings.Index(sym[slash+1:], ".")
	if dot < 0 {
		return sym
	}
	return sym[:slash+1+dot]
}

// moduleOf groups packages by their module or a well-known prefix.
func moduleOf(pkg string) string {
	for _, prefix := range []string{
		"k8s.io/api/", "k8s.io/client-go/kubernetes/typed/", "k8s.io/client-go/applyconfigurations/",
		"k8s.io/client-go/informers/", "k8s.io/client-go/listers/", "k8s.io/client-go/",
		"k8s.io/apimachinery/", "github.com/aws/aws-sdk-go-v2/service/", "github.com/aws/",
		"google.golang.org/protobuf/", "github.com/prometheus/",
	} {
		if strings.HasPrefix(pkg, prefix) {
			if strings.HasSuffix(prefix, "/service/") {
				return prefix + strings.SplitN(strings.TrimPrefix(pkg, prefix), "/", 2)[0]
			}
			return prefix + "…"
		}
	}
	if strings.Contains(pkg, ".") && strings.Contains(pkg, "/") {
		parts := strings.Split(pkg, "/")
		return strings.Join(parts[:min(3, len(parts))], "/")
	}
	return "std, runtime and linker (" + strings.SplitN(pkg, "/", 2)[0] + ")"
}

func print(title string, m map[string]int64, n int) {
	type row struct {
		name string
		size int64
	}
	var rows []row
	for k, v := range m {
		rows = append(rows, row{k, v})
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(b.size, a.size) })
	fmt.Printf("%8s  %s\n", "MB", title)
	var rest int64
	for i, r := range rows {
		if i < n {
			fmt.Printf("%8.2f  %s\n", mb(r.size), r.name)
		} else {
			rest += r.size
		}
	}
	if rest > 0 {
		fmt.Printf("%8.2f  (%d more)\n", mb(rest), len(rows)-n)
	}
}

func mb(b int64) float64 { return float64(b) / 1e6 }
