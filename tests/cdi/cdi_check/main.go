// cdi_check loads a CDI spec directory with the CDI Go library that Debian 12
// packages (container-device-interface 0.5.2, the library podman 4.3.1 links),
// reports every spec error, and injects the named devices into an empty OCI
// spec, printing the result as JSON.
//
//	cdi_check -spec-dir DIR [-device vendor/class=name]...
//
// Exit status: 0 on success; 1 if a spec failed to load or a device did not
// resolve or inject; 2 for bad usage.
//
// Built offline in GOPATH mode against /usr/share/gocode (no modules).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/container-orchestrated-devices/container-device-interface/pkg/cdi"
	oci "github.com/opencontainers/runtime-spec/specs-go"
)

type deviceList []string

func (d *deviceList) String() string     { return strings.Join(*d, ",") }
func (d *deviceList) Set(v string) error { *d = append(*d, v); return nil }

func main() {
	specDir := flag.String("spec-dir", "", "CDI spec directory to load")
	var devices deviceList
	flag.Var(&devices, "device", "fully qualified CDI device to inject (repeatable)")
	flag.Parse()
	if *specDir == "" {
		fmt.Fprintln(os.Stderr, "cdi_check: -spec-dir is required")
		os.Exit(2)
	}

	cache, err := cdi.NewCache(cdi.WithSpecDirs(*specDir), cdi.WithAutoRefresh(false))
	failed := false
	if err != nil {
		fmt.Fprintf(os.Stderr, "cdi_check: NewCache: %v\n", err)
		failed = true
	}
	if cache == nil {
		os.Exit(1)
	}
	if err := cache.Refresh(); err != nil {
		fmt.Fprintf(os.Stderr, "cdi_check: Refresh: %v\n", err)
		failed = true
	}
	errs := cache.GetErrors()
	paths := make([]string, 0, len(errs))
	for p := range errs {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		for _, e := range errs[p] {
			fmt.Fprintf(os.Stderr, "cdi_check: spec error: %s: %v\n", p, e)
			failed = true
		}
	}
	fmt.Fprintf(os.Stderr, "cdi_check: devices: %s\n", strings.Join(cache.ListDevices(), " "))

	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if len(devices) > 0 {
		unresolved, err := cache.InjectDevices(spec, devices...)
		if err != nil {
			fmt.Fprintf(os.Stderr, "cdi_check: inject: %v (unresolved: %v)\n", err, unresolved)
			failed = true
		}
	}
	out, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		fmt.Fprintf(os.Stderr, "cdi_check: marshal: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(string(out))
	if failed {
		os.Exit(1)
	}
}
