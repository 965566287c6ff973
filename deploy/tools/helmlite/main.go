// helmlite renders the migd Helm chart the way `helm template` does, for the
// subset of Helm the chart uses, and checks that every rendered manifest is
// well-formed YAML with apiVersion, kind and metadata.name. It exists because
// Helm itself is not packaged in Debian 12; deploy/check.sh runs it.
//
//	helmlite [-values override.yaml]... [-print] [-config-out FILE] CHART_DIR
//
// Functions: Go's builtins plus include, toYaml, indent, nindent, quote, default,
// trunc, trimSuffix, contains, replace, regexReplaceAll, kindIs, sha256sum
// (Sprig/Helm semantics). A template calling anything else fails to parse, which
// keeps the chart within what this check covers. Missing value keys are errors.
//
// Builds in GOPATH mode against Debian's packaged sources:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go run deploy/tools/helmlite/main.go deploy/helm/migd
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"text/template"

	"sigs.k8s.io/yaml"
)

type valueFiles []string

func (v *valueFiles) String() string     { return strings.Join(*v, ",") }
func (v *valueFiles) Set(s string) error { *v = append(*v, s); return nil }

func readYAML(path string) (map[string]interface{}, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]interface{}{}
	if err := yaml.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return out, nil
}

// mergeValues overlays src onto dst the way Helm coalesces -f files: maps merge
// recursively, anything else replaces, and an explicit null deletes the key.
func mergeValues(dst, src map[string]interface{}) {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
			continue
		}
		if sm, ok := v.(map[string]interface{}); ok {
			if dm, ok := dst[k].(map[string]interface{}); ok {
				mergeValues(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

func indent(n int, s string) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}

func toYAML(v interface{}) string {
	data, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}

func kindOf(v interface{}) string {
	if v == nil {
		return "invalid"
	}
	return reflect.ValueOf(v).Kind().String()
}

func isEmpty(v interface{}) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.String, reflect.Map, reflect.Slice, reflect.Array:
		return rv.Len() == 0
	case reflect.Bool:
		return !rv.Bool()
	case reflect.Float64, reflect.Float32:
		return rv.Float() == 0
	case reflect.Int, reflect.Int64, reflect.Int32:
		return rv.Int() == 0
	}
	return false
}

func render(chartDir string, overrides []string) (map[string]string, error) {
	chart, err := readYAML(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		return nil, err
	}
	values, err := readYAML(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		return nil, err
	}
	for _, f := range overrides {
		o, err := readYAML(f)
		if err != nil {
			return nil, err
		}
		mergeValues(values, o)
	}
	name, _ := chart["name"].(string)
	top := map[string]interface{}{
		"Values": values,
		"Chart": map[string]interface{}{
			"Name": name, "Version": chart["version"], "AppVersion": chart["appVersion"],
		},
		"Release": map[string]interface{}{
			"Name": "migd", "Namespace": "migd-system", "Service": "Helm",
		},
		"Template": map[string]interface{}{"BasePath": name + "/templates"},
	}

	root := template.New("root").Option("missingkey=error")
	funcs := template.FuncMap{
		"include": func(n string, data interface{}) (string, error) {
			var buf bytes.Buffer
			err := root.ExecuteTemplate(&buf, n, data)
			return buf.String(), err
		},
		"toYaml":  toYAML,
		"indent":  indent,
		"nindent": func(n int, s string) string { return "\n" + indent(n, s) },
		"quote": func(v ...interface{}) string {
			parts := make([]string, 0, len(v))
			for _, x := range v {
				if x != nil {
					parts = append(parts, fmt.Sprintf("%q", fmt.Sprint(x)))
				}
			}
			return strings.Join(parts, " ")
		},
		"default": func(d interface{}, v ...interface{}) interface{} {
			if len(v) == 0 || isEmpty(v[0]) {
				return d
			}
			return v[0]
		},
		"trunc": func(n int, s string) string {
			if len(s) > n {
				return s[:n]
			}
			return s
		},
		"trimSuffix": func(suf, s string) string { return strings.TrimSuffix(s, suf) },
		"trimPrefix": func(pre, s string) string { return strings.TrimPrefix(s, pre) },
		"list":       func(v ...interface{}) []interface{} { return v },
		"contains":   func(sub, s string) bool { return strings.Contains(s, sub) },
		"replace":    func(old, repl, s string) string { return strings.ReplaceAll(s, old, repl) },
		"regexReplaceAll": func(re, s, repl string) string {
			return regexp.MustCompile(re).ReplaceAllString(s, repl)
		},
		"kindIs":    func(k string, v interface{}) bool { return kindOf(v) == k },
		"sha256sum": func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) },
	}
	root.Funcs(funcs)

	files, err := filepath.Glob(filepath.Join(chartDir, "templates", "*"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		n := name + "/templates/" + filepath.Base(f)
		if _, err := root.New(n).Parse(string(data)); err != nil {
			return nil, err
		}
		if !strings.HasPrefix(filepath.Base(f), "_") {
			names = append(names, n)
		}
	}
	out := map[string]string{}
	for _, n := range names {
		var buf bytes.Buffer
		ctx := map[string]interface{}{}
		for k, v := range top {
			ctx[k] = v
		}
		ctx["Template"] = map[string]interface{}{"BasePath": name + "/templates", "Name": n}
		if err := root.ExecuteTemplate(&buf, n, ctx); err != nil {
			return nil, err
		}
		out[n] = buf.String()
	}
	return out, nil
}

// checkManifests parses every YAML document of every rendered .yaml file.
// The ConfigMap's data["migd.yaml"] is returned in *configOut.
func checkManifests(rendered map[string]string, configOut *string) (int, error) {
	count := 0
	keys := make([]string, 0, len(rendered))
	for k := range rendered {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, n := range keys {
		if !strings.HasSuffix(n, ".yaml") {
			continue
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(rendered[n], -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			obj := map[string]interface{}{}
			if err := yaml.UnmarshalStrict([]byte(doc), &obj); err != nil {
				return count, fmt.Errorf("%s (document %d): %v\n%s", n, i, err, doc)
			}
			if len(obj) == 0 {
				continue // only comments
			}
			md, _ := obj["metadata"].(map[string]interface{})
			if obj["apiVersion"] == nil || obj["kind"] == nil || md == nil || md["name"] == nil {
				return count, fmt.Errorf("%s (document %d): missing apiVersion, kind or metadata.name", n, i)
			}
			if obj["kind"] == "ConfigMap" {
				data, _ := obj["data"].(map[string]interface{})
				inner := map[string]interface{}{}
				text, _ := data["migd.yaml"].(string)
				if err := yaml.UnmarshalStrict([]byte(text), &inner); err != nil || len(inner) == 0 {
					return count, fmt.Errorf("%s: data.migd.yaml: not a YAML map: %v", n, err)
				}
				*configOut = text
			}
			count++
		}
	}
	return count, nil
}

func main() {
	var overrides valueFiles
	flag.Var(&overrides, "values", "values file merged over the chart's values.yaml (repeatable)")
	print := flag.Bool("print", false, "print the rendered manifests")
	configFile := flag.String("config-out", "", "write the ConfigMap's migd.yaml to this file")
	manifestsFile := flag.String("manifests-out", "", "write the rendered manifests (as -print) to this file")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: helmlite [-values FILE]... [-print] [-config-out FILE] [-manifests-out FILE] CHART_DIR")
		os.Exit(2)
	}
	rendered, err := render(flag.Arg(0), overrides)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helmlite: render:", err)
		os.Exit(1)
	}
	// Like `helm template`: the .yaml templates only (not NOTES.txt).
	var manifests strings.Builder
	keys := make([]string, 0, len(rendered))
	for k := range rendered {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if strings.HasSuffix(k, ".yaml") {
			fmt.Fprintf(&manifests, "---\n# Source: %s\n%s\n", k, rendered[k])
		}
	}
	if *print {
		fmt.Print(manifests.String())
	}
	if *manifestsFile != "" {
		if err := os.WriteFile(*manifestsFile, []byte(manifests.String()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "helmlite:", err)
			os.Exit(1)
		}
	}
	var config string
	n, err := checkManifests(rendered, &config)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helmlite: invalid manifest:", err)
		os.Exit(1)
	}
	if *configFile != "" {
		if config == "" {
			fmt.Fprintln(os.Stderr, "helmlite: no ConfigMap with migd.yaml rendered")
			os.Exit(1)
		}
		if err := os.WriteFile(*configFile, []byte(config), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "helmlite:", err)
			os.Exit(1)
		}
	}
	fmt.Fprintf(os.Stderr, "helmlite: %d manifests rendered and parsed\n", n)
}
