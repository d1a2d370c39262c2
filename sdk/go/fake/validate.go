package fake

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/wasmrec/wasmrec/abi"
)

// The API server's checks of names, label keys and values (k8s.io/apimachinery's validation),
// the ones a plugin most often trips on.

var (
	qualifiedNameRE = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	dns1123LabelRE  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1123SubRE    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	dns1035LabelRE  = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
)

// validKey checks a label or annotation key: an optional DNS subdomain prefix and "/", then a
// name of at most 63 characters.
func validKey(k string) error {
	prefix, name, hasPrefix := strings.Cut(k, "/")
	if !hasPrefix {
		name, prefix = prefix, ""
	} else if prefix == "" {
		return fmt.Errorf("%q: prefix part must be non-empty", k)
	} else if err := dnsSubdomain(prefix); err != nil {
		return fmt.Errorf("%q: prefix part %v", k, err)
	}
	switch {
	case name == "":
		return fmt.Errorf("%q: name part must be non-empty", k)
	case len(name) > 63:
		return fmt.Errorf("%q: name part must be no more than 63 characters", k)
	case !qualifiedNameRE.MatchString(name):
		return fmt.Errorf("%q: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character", k)
	}
	return nil
}

// validValue checks a label value: empty, or at most 63 characters of a qualified name.
func validValue(v string) error {
	switch {
	case v == "":
		return nil
	case len(v) > 63:
		return fmt.Errorf("%q: must be no more than 63 characters", v)
	case !qualifiedNameRE.MatchString(v):
		return fmt.Errorf("%q: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character", v)
	}
	return nil
}

func dnsSubdomain(s string) error {
	if len(s) > 253 || !dns1123SubRE.MatchString(s) {
		return fmt.Errorf("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (at most 253 characters)")
	}
	return nil
}

// validName checks an object's name as the kind's API server validation does: a Service's is a
// DNS-1035 label, a Namespace's a DNS-1123 label, RBAC kinds' any path segment, others' a
// DNS-1123 subdomain.
func validName(k kindInfo, name string) error {
	if name == "." || name == ".." || strings.ContainsAny(name, "/%") {
		return fmt.Errorf("may not be '.' or '..' and may not contain '/' or '%%'")
	}
	switch {
	case k.group == "rbac.authorization.k8s.io":
		return nil
	case k.group == "" && k.kind == "Service":
		if len(name) > 63 || !dns1035LabelRE.MatchString(name) {
			return fmt.Errorf("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (at most 63 characters)")
		}
	case k.group == "" && k.kind == "Namespace":
		if len(name) > 63 || !dns1123LabelRE.MatchString(name) {
			return fmt.Errorf("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (at most 63 characters)")
		}
	default:
		return dnsSubdomain(name)
	}
	return nil
}

// validateMeta checks what the API server checks of every object's metadata on a write: its
// name, its labels and its annotations' keys. The error is the API server's invalid message.
func validateMeta(k kindInfo, o map[string]any) error {
	name := str(o, "metadata", "name")
	var errs []string
	if err := validName(k, name); err != nil {
		errs = append(errs, fmt.Sprintf("metadata.name: Invalid value: %q: %v", name, err))
	}
	if labels, ok := nested(o, "metadata", "labels").(map[string]any); ok {
		for _, key := range slices.Sorted(maps.Keys(labels)) {
			v := labels[key]
			s, isString := v.(string)
			switch {
			case validKey(key) != nil:
				errs = append(errs, fmt.Sprintf("metadata.labels: Invalid value: %v", validKey(key)))
			case !isString:
				errs = append(errs, fmt.Sprintf("metadata.labels.%s: Invalid value: not a string", key))
			case validValue(s) != nil:
				errs = append(errs, fmt.Sprintf("metadata.labels: Invalid value: %v", validValue(s)))
			}
		}
	}
	if annotations, ok := nested(o, "metadata", "annotations").(map[string]any); ok {
		for _, key := range slices.Sorted(maps.Keys(annotations)) {
			v := annotations[key]
			if err := validKey(strings.ToLower(key)); err != nil {
				errs = append(errs, fmt.Sprintf("metadata.annotations: Invalid value: %v", err))
			} else if _, isString := v.(string); !isString {
				errs = append(errs, fmt.Sprintf("metadata.annotations.%s: Invalid value: not a string", key))
			}
		}
	}
	if len(errs) > 0 {
		return fail(abi.StatusInvalid, "%s %q is invalid: %s", k.kind, name, strings.Join(errs, ", "))
	}
	return nil
}
