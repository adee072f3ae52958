// Command schemas prints, as JSON, how encoding/json writes every struct type reachable from
// the kinds of the built-in Kubernetes API: for each type (by its OpenAPI definition name),
// its fields in declaration order with their JSON name and a code saying what Go does with
// them. `cargo xtask schemas` joins this with the OpenAPI documents of the same release.
//
// Codes: the value's category (`p` pointer, `s` slice, `m` map, `t` struct, `str`, `bool`,
// `int`, `float`, `bytes`, and the API machinery types with their own encoding: `time`,
// `quantity`, `intstr`, `duration`, `raw`), the Go type of a scalar or of what a pointer to a
// scalar points to after `:` (decoding errors name it), then `,e` for omitempty, `,z` for
// omitzero and `,i=` with the embedded structs the field comes through (`ProbeHandler`).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes/scheme"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

var marshaler = reflect.TypeOf((*json.Marshaler)(nil)).Elem()

// special names the API machinery types that encode themselves.
func special(t reflect.Type) string {
	if t.Name() == "" {
		return ""
	}
	switch t.PkgPath() + "." + t.Name() {
	case "k8s.io/apimachinery/pkg/apis/meta/v1.Time", "k8s.io/apimachinery/pkg/apis/meta/v1.MicroTime":
		return "time"
	case "k8s.io/apimachinery/pkg/api/resource.Quantity":
		return "quantity"
	case "k8s.io/apimachinery/pkg/util/intstr.IntOrString":
		return "intstr"
	case "k8s.io/apimachinery/pkg/apis/meta/v1.Duration":
		return "duration"
	case "k8s.io/apimachinery/pkg/runtime.RawExtension",
		"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.JSON",
		"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.JSONSchemaPropsOrArray",
		"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.JSONSchemaPropsOrBool",
		"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.JSONSchemaPropsOrStringArray",
		"k8s.io/apimachinery/pkg/apis/meta/v1.FieldsV1":
		return "raw"
	}
	if reflect.PointerTo(t).Implements(marshaler) || t.Implements(marshaler) {
		fmt.Fprintf(os.Stderr, "unhandled json.Marshaler: %s.%s\n", t.PkgPath(), t.Name())
		os.Exit(1)
	}
	return ""
}

// definitionName is kube-openapi's name for a Go type: the package path with its domain
// reversed, then the type name (k8s.io/api/core/v1.Pod is io.k8s.api.core.v1.Pod).
func definitionName(t reflect.Type) string {
	path := t.PkgPath()
	domain, rest, _ := strings.Cut(path, "/")
	labels := strings.Split(domain, ".")
	for i, j := 0, len(labels)-1; i < j; i, j = i+1, j-1 {
		labels[i], labels[j] = labels[j], labels[i]
	}
	return strings.Join(labels, ".") + "." + strings.ReplaceAll(rest, "/", ".") + "." + t.Name()
}

type field [2]string

var (
	types = map[string][]field{}
	seen  = map[reflect.Type]bool{}
)

func category(t reflect.Type) string {
	if s := special(t); s != "" {
		return s
	}
	switch t.Kind() {
	case reflect.Pointer:
		visit(t.Elem())
		return "p"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "bytes"
		}
		visit(t.Elem())
		return "s"
	case reflect.Map:
		visit(t.Elem())
		return "m"
	case reflect.Struct:
		visit(t)
		return "t"
	case reflect.String:
		return "str"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "int"
	case reflect.Float32, reflect.Float64:
		return "float"
	case reflect.Interface:
		return "raw"
	}
	fmt.Fprintf(os.Stderr, "unhandled kind %s of %s\n", t.Kind(), t)
	os.Exit(1)
	return ""
}

// fields appends the encoded fields of struct t (inline members flattened, as encoding/json
// does; `via` names the embedded structs they come through, which decoding errors name).
func fields(t reflect.Type, via string, out *[]field) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			inner := f.Type
			if inner.Kind() == reflect.Pointer {
				inner = inner.Elem()
			}
			if inner.Kind() == reflect.Struct && special(inner) == "" {
				fields(inner, via+"."+f.Name, out)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		code := category(f.Type)
		if scalar := f.Type; scalar.Kind() != reflect.Struct {
			if scalar.Kind() == reflect.Pointer {
				scalar = scalar.Elem()
			}
			switch scalar.Kind() {
			case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16,
				reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16,
				reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
				code += ":" + scalar.String()
			}
		}
		for o := range strings.SplitSeq(opts, ",") {
			switch o {
			case "omitempty":
				code += ",e"
			case "omitzero":
				code += ",z"
			}
		}
		if via != "" {
			code += ",i=" + via[1:]
		}
		*out = append(*out, field{name, code})
	}
}

func visit(t reflect.Type) {
	if t.Kind() != reflect.Struct || seen[t] || special(t) != "" {
		return
	}
	seen[t] = true
	var out []field
	fields(t, "", &out)
	types[definitionName(t)] = out
}

func main() {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		scheme.AddToScheme, apiextensionsv1.AddToScheme, apiregistrationv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	for _, t := range s.AllKnownTypes() {
		visit(t)
	}
	// The discovery documents' types, which the OpenAPI documents of /api, /apis and
	// /version describe.
	for _, v := range []any{metav1.APIGroupList{}, metav1.APIVersions{}, metav1.APIResourceList{}, version.Info{}} {
		visit(reflect.TypeOf(v))
	}
	out, err := json.Marshal(types)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
}
