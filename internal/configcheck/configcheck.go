package configcheck

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Check reports the mistakes in data as a document of type t, one error per mistake, in the
// order of the file; nil if it finds none (the caller's decoder then says what it found).
func Check(data []byte, t reflect.Type) []error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		return []error{fmt.Errorf("%s: the YAML does not parse; check the indentation and the quoting there", msg)}
	}
	if len(doc.Content) == 0 {
		return nil
	}
	c := &checker{}
	c.value(doc.Content[0], t, "")
	return c.errs
}

type checker struct{ errs []error }

func (c *checker) fail(n *yaml.Node, path, format string, args ...any) {
	where := path
	if where == "" {
		where = "the top level"
	}
	c.errs = append(c.errs, fmt.Errorf("line %d: %s: %s", n.Line, where, fmt.Sprintf(format, args...)))
}

var (
	durationType = reflect.TypeFor[metav1.Duration]()
	quantityType = reflect.TypeFor[resource.Quantity]()
)

// value checks node n as a value of type t at path.
func (c *checker) value(n *yaml.Node, t reflect.Type, path string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Tag == "!!null" {
		return // left unset
	}
	switch {
	case t == durationType:
		if _, err := time.ParseDuration(n.Value); n.Kind != yaml.ScalarNode || err != nil {
			c.fail(n, path, "%s is not a duration: write one like 30s, 2m or 1h30m", shown(n))
		}
		return
	case t == quantityType:
		if _, err := resource.ParseQuantity(n.Value); n.Kind != yaml.ScalarNode || err != nil {
			c.fail(n, path, "%s is not a quantity: write one like 128Mi, 1Gi or 500M", shown(n))
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		c.object(n, t, path)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 { // bytes: base64 text
			c.scalar(n, path, "!!str", "a string", "write a string")
			return
		}
		if n.Kind != yaml.SequenceNode {
			c.fail(n, path, "%s is not a list: write one as [a, b] or as lines that start with \"- \"", shown(n))
			return
		}
		for i, item := range n.Content {
			c.value(item, t.Elem(), fmt.Sprintf("%s[%d]%s", path, i, nameOf(item)))
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			c.fail(n, path, "%s is not a mapping: write key: value lines under it", shown(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			c.value(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value))
		}
	case reflect.String:
		c.scalar(n, path, "!!str", "a string", "write a string")
	case reflect.Bool:
		c.scalar(n, path, "!!bool", "true or false", "write true or false, unquoted")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		c.scalar(n, path, "!!int", "a whole number", "write one unquoted, like 3")
	case reflect.Float32, reflect.Float64:
		if n.Kind == yaml.ScalarNode && n.Tag == "!!int" {
			return
		}
		c.scalar(n, path, "!!float", "a number", "write one unquoted, like 0.5 (a fraction, not a percent)")
	}
	// Interfaces and the rest take anything.
}

// scalar checks that n is a scalar with tag: what it is, and form how to write one.
func (c *checker) scalar(n *yaml.Node, path, tag, what, form string) {
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == tag:
	case n.Kind == yaml.ScalarNode && tag == "!!str":
		c.fail(n, path, "%s is read as a %s, not a string: quote it", n.Value, strings.TrimPrefix(n.Tag, "!!"))
	default:
		c.fail(n, path, "%s is not %s: %s", shown(n), what, form)
	}
}

// object checks a mapping against a struct's JSON fields.
func (c *checker) object(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind != yaml.MappingNode {
		c.fail(n, path, "%s is not a mapping: write its fields as key: value lines under it", shown(n))
		return
	}
	fields := fieldsOf(t)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		f, ok := fields[k.Value]
		if !ok {
			c.fail(k, path, "unknown field %q%s", k.Value, suggest(k.Value, fields))
			continue
		}
		c.value(v, f, join(path, k.Value))
	}
}

// fieldsOf are t's JSON fields by name, those of embedded structs without a name included.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || (!f.IsExported() && !f.Anonymous):
		case f.Anonymous && name == "":
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range fieldsOf(ft) {
					out[k] = v
				}
			}
		case name == "":
			out[f.Name] = f.Type
		default:
			out[name] = f.Type
		}
	}
	return out
}

// suggest is ": did you mean "x"?" for the field closest to name, or the fields there are.
func suggest(name string, fields map[string]reflect.Type) string {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	best, bestD := "", len(name)
	for _, k := range names {
		if d := distance(strings.ToLower(name), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	if best != "" && bestD <= max(2, len(name)/4) {
		return fmt.Sprintf(": did you mean %q?", best)
	}
	return fmt.Sprintf(": the fields here are %s", strings.Join(names, ", "))
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// nameOf is " (name)" for a list item that is a mapping with a name, so that a path names the
// plugin: "plugins[2] (app)".
func nameOf(n *yaml.Node) string {
	if n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "name" && n.Content[i+1].Kind == yaml.ScalarNode && n.Content[i+1].Value != "" {
			return " (" + n.Content[i+1].Value + ")"
		}
	}
	return ""
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// shown is how a value is quoted in a message.
func shown(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	if n.Tag == "!!str" {
		return strconv.Quote(n.Value)
	}
	return n.Value
}

// File is the mistakes Check finds in the file at path as one error, a mistake a line, each
// naming the file; nil if it finds none.
func File(path string, data []byte, t reflect.Type) error {
	errs := Check(data, t)
	for i, err := range errs {
		errs[i] = fmt.Errorf("%s: %w", path, err)
	}
	return errors.Join(errs...)
}

// Line is the line of the node at path in data, keys (strings) and list indexes (ints) from the
// top: the line of a key for a key, of an item for an index. 0 where data does not parse or
// holds no such node.
func Line(data []byte, path ...any) int {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return 0
	}
	n, line := doc.Content[0], 0
	for _, step := range path {
		if n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		switch step := step.(type) {
		case string:
			if n.Kind != yaml.MappingNode {
				return 0
			}
			found := false
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == step {
					line, n, found = n.Content[i].Line, n.Content[i+1], true
					break
				}
			}
			if !found {
				return 0
			}
		case int:
			if n.Kind != yaml.SequenceNode || step < 0 || step >= len(n.Content) {
				return 0
			}
			n = n.Content[step]
			line = n.Line
		default:
			return 0
		}
	}
	return line
}
