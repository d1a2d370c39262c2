package metrics_test

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/client-go/util/workqueue"

	"github.com/wasmrec/wasmrec/host/metrics"
)

// dashboardFile is the Grafana dashboard operators import (docs/operators.md).
const dashboardFile = "../../deploy/grafana/grafana-dashboard.json"

// targetLabels are the labels Prometheus adds to every series it scrapes.
var targetLabels = []string{"job", "instance"}

// series is one series name a host serves, as PromQL selects it: a counter's name, a
// histogram's _bucket, _sum and _count, a summary's name (by quantile), _sum and _count.
type series struct {
	family  string
	counter bool            // rate() and increase() apply
	bucket  bool            // a histogram's _bucket: histogram_quantile applies
	labels  map[string]bool // the family's labels, le or quantile, and the target labels
}

// served builds a registry as the host does (metrics.New, the Watch* registrations, a
// plugin, the handler) and lists the series names it serves. Gather leaves out a vector with
// no series yet, so every recorder gets one first; then every family the registry describes
// must have been gathered, or the test fails naming it: what it lists comes from the code,
// not from a hand-kept list.
func served(t *testing.T) map[string]series {
	t.Helper()
	m := metrics.New()
	m.WatchDiscovery(func() uint64 { return 0 })
	m.WatchInformers(func() int { return 0 })
	m.WatchAPIServer(func() bool { return true })
	m.WatchInformerObjects(func() []metrics.InformerObjects {
		return []metrics.InformerObjects{{Kind: "ConfigMap.v1", Namespace: "default", Shard: "1/2", Objects: 1}}
	})
	m.WatchPluginObjectBudgets(metrics.Budgets{MemoryBytes: 1 << 30, NamespaceMemoryBytes: 1 << 28, Units: 512, NamespaceUnits: 64}, func() []metrics.BudgetUse {
		return []metrics.BudgetUse{{Namespace: "team-a", MemoryBytes: 1 << 20, Units: 1}}
	})
	m.RegisterPlugin("p", func() metrics.PluginStats { return metrics.PluginStats{Digest: "sha256:0", Records: true} })
	_ = m.Handler() // registers promhttp_metric_handler_errors_total, as the host's /metrics does

	c := m.Controller("p")
	c.SetMaxWorkers(1)
	c.Reconciled("error", true, true, time.Millisecond)
	// Every queue metric client-go asks the provider for.
	provider := reflect.ValueOf(m.WorkqueueProvider())
	iface := reflect.TypeFor[workqueue.MetricsProvider]()
	for i := range iface.NumMethod() {
		provider.MethodByName(iface.Method(i).Name).Call([]reflect.Value{reflect.ValueOf("p")})
	}
	// Every exported vector (HostCalls, Swaps, ...): one series each, whatever its labels.
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() || f.Kind() != reflect.Pointer || f.IsNil() || f.Elem().Kind() != reflect.Struct {
			continue
		}
		vec := f.Elem().FieldByName("MetricVec") // CounterVec, GaugeVec, HistogramVec, SummaryVec
		if !vec.IsValid() || vec.Type() != reflect.TypeFor[*prometheus.MetricVec]() {
			continue
		}
		if err := oneSeries(vec.Interface().(*prometheus.MetricVec)); err != nil {
			t.Fatalf("metrics.Metrics.%s: %v", v.Type().Field(i).Name, err)
		}
	}

	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	descs := make(chan *prometheus.Desc)
	go func() { m.Registry.Describe(descs); close(descs) }()
	for d := range descs {
		if !slices.ContainsFunc(names, func(n string) bool { return strings.Contains(d.String(), fmt.Sprintf("fqName: %q", n)) }) {
			t.Errorf("the registry describes %s but the test gathered no series of it: give it one in served", d)
		}
	}

	out := map[string]series{}
	add := func(name string, s series, extra ...string) {
		labels := map[string]bool{}
		for l := range s.labels {
			labels[l] = true
		}
		for _, l := range append(extra, targetLabels...) {
			labels[l] = true
		}
		s.labels = labels
		out[name] = s
	}
	for _, f := range families {
		name, labels := f.GetName(), map[string]bool{}
		for _, series := range f.GetMetric() {
			for _, l := range series.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		s := series{family: name, labels: labels}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			s.counter = true
			add(name, s)
		case dto.MetricType_GAUGE, dto.MetricType_UNTYPED:
			add(name, s)
		case dto.MetricType_HISTOGRAM:
			s.counter = true
			add(name+"_sum", s)
			add(name+"_count", s)
			s.bucket = true
			add(name+"_bucket", s, "le")
		case dto.MetricType_SUMMARY:
			add(name, s, "quantile")
			s.counter = true
			add(name+"_sum", s)
			add(name+"_count", s)
		default:
			t.Fatalf("%s: type %v not handled", name, f.GetType())
		}
	}
	return out
}

// oneSeries makes a series of vec, with as many label values as it has labels.
func oneSeries(vec *prometheus.MetricVec) error {
	var err error
	for n := range 16 {
		if _, err = vec.GetMetricWithLabelValues(slices.Repeat([]string{"x"}, n)...); err == nil {
			return nil
		}
	}
	return err
}

// The dashboard's JSON, as much of it as is checked.
type (
	dashboard struct {
		UID           string `json:"uid"`
		Title         string `json:"title"`
		SchemaVersion int    `json:"schemaVersion"`
		Panels        []panel
		Templating    struct{ List []variable }
	}
	panel struct {
		ID         int    `json:"id"`
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource json.RawMessage
		Targets    []target
		Panels     []panel // a collapsed row's
	}
	target struct {
		Expr       string
		RefID      string `json:"refId"`
		Datasource json.RawMessage
	}
	variable struct {
		Name       string
		Type       string
		Datasource json.RawMessage
		Definition string
		Query      json.RawMessage // a string, or {"query": ...}
	}
)

// grafanaVars are the variables Grafana itself defines, as the parser is shown them.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// The dashboard queries only what a host serves: each query parses as PromQL, names series the
// host's registry serves, selects and groups by labels those series have, takes rate() and
// increase() of counters only and histogram_quantile() of buckets by le; each panel has a
// title and queries the ${datasource} variable.
func TestDashboard(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || d.Title == "" || d.SchemaVersion == 0 {
		t.Errorf("the dashboard has uid %q, title %q and schemaVersion %d: it needs all three", d.UID, d.Title, d.SchemaVersion)
	}
	s := served(t)

	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	for _, want := range []string{"datasource", "plugin"} {
		if !vars[want] {
			t.Errorf("no template variable %q", want)
		}
	}
	queries := 0
	check := func(where, expr string) {
		queries++
		for _, err := range checkQuery(s, vars, expr) {
			t.Errorf("%s: %s: %v", where, expr, err)
		}
	}

	for _, v := range d.Templating.List {
		where := "variable " + v.Name
		switch v.Type {
		case "datasource":
			if q := string(v.Query); v.Name != "datasource" || q != `"prometheus"` {
				t.Errorf("%s: a datasource variable is named datasource and of type prometheus, not %s", where, q)
			}
		case "query":
			checkDatasource(t, where, v.Datasource)
			var q struct{ Query string }
			if err := json.Unmarshal(v.Query, &q.Query); err != nil {
				if err := json.Unmarshal(v.Query, &q); err != nil {
					t.Errorf("%s: query: %v", where, err)
				}
			}
			if q.Query == "" {
				t.Errorf("%s: no query", where)
			}
			for _, expr := range slices.Compact([]string{q.Query, v.Definition}) {
				if expr == "" {
					continue
				}
				queries++
				for _, err := range checkVariable(s, vars, expr) {
					t.Errorf("%s: %s: %v", where, expr, err)
				}
			}
		}
	}

	ids, count := map[int]bool{}, 0
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
			if ids[p.ID] {
				t.Errorf("%s: its id is another panel's", where)
			}
			ids[p.ID] = true
			if p.Title == "" {
				t.Errorf("%s: no title", where)
			}
			if p.Type == "row" { // a row queries nothing
				walk(p.Panels)
				continue
			}
			count++
			checkDatasource(t, where, p.Datasource)
			if len(p.Targets) == 0 {
				t.Errorf("%s: no query", where)
			}
			for _, q := range p.Targets {
				checkDatasource(t, where+" "+q.RefID, q.Datasource)
				check(where, q.Expr)
			}
		}
	}
	walk(d.Panels)
	t.Logf("%d panels, %d queries, against %d series names the host serves", count, queries, len(s))
}

func checkDatasource(t *testing.T, where string, raw json.RawMessage) {
	t.Helper()
	var ds struct{ Type, UID string }
	if err := json.Unmarshal(raw, &ds); err != nil || ds.Type != "prometheus" || ds.UID != "${datasource}" {
		t.Errorf(`%s: datasource %s, not {"type": "prometheus", "uid": "${datasource}"}`, where, raw)
	}
}

var (
	promql      = parser.NewParser(parser.Options{})
	varRef      = regexp.MustCompile(`\$\{?(\w+)`)
	labelValues = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\s*\)$`)
)

// checkVariable checks a query variable's label_values(selector, label).
func checkVariable(s map[string]series, vars map[string]bool, q string) []error {
	m := labelValues.FindStringSubmatch(strings.TrimSpace(q))
	if m == nil {
		return []error{fmt.Errorf("not label_values(selector, label)")}
	}
	errs := checkQuery(s, vars, m[1])
	if len(errs) > 0 {
		return errs
	}
	e, _ := promql.ParseExpr(grafanaVars.Replace(m[1]))
	if _, ok := e.(*parser.VectorSelector); !ok {
		return []error{fmt.Errorf("%s is not a series selector", m[1])}
	}
	if !labelsOf(s, e)[m[2]] {
		return []error{fmt.Errorf("%s has no label %s", m[1], m[2])}
	}
	return nil
}

// checkQuery checks one PromQL expression against the series s.
func checkQuery(s map[string]series, vars map[string]bool, expr string) []error {
	var errs []error
	for _, m := range varRef.FindAllStringSubmatch(expr, -1) {
		if !vars[m[1]] && !strings.HasPrefix(m[1], "__") {
			errs = append(errs, fmt.Errorf("$%s is no template variable", m[1]))
		}
	}
	e, err := promql.ParseExpr(grafanaVars.Replace(expr))
	if err != nil {
		return append(errs, err)
	}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			ser, ok := s[n.Name]
			if !ok {
				errs = append(errs, fmt.Errorf("%q is no series the host serves", n.Name))
				break
			}
			for _, m := range n.LabelMatchers {
				if m.Name != "__name__" && !ser.labels[m.Name] {
					errs = append(errs, fmt.Errorf("%s has no label %s (it has %s)", n.Name, m.Name, list(ser.labels)))
				}
			}
		case *parser.AggregateExpr:
			if !known(s, n.Expr) { // said above
				break
			}
			have := labelsOf(s, n.Expr)
			for _, l := range n.Grouping {
				if !have[l] {
					errs = append(errs, fmt.Errorf("%s by %s: %s has no label %s (it has %s)", n.Op, l, n.Expr, l, list(have)))
				}
			}
		case *parser.BinaryExpr:
			if vm := n.VectorMatching; vm != nil && vm.On && known(s, n) {
				for _, side := range []parser.Expr{n.LHS, n.RHS} {
					have := labelsOf(s, side)
					for _, l := range vm.MatchingLabels {
						if !have[l] {
							errs = append(errs, fmt.Errorf("on(%s): %s has no label %s", l, side, l))
						}
					}
				}
			}
		case *parser.Call:
			switch n.Func.Name {
			case "rate", "irate", "increase":
				for _, name := range selected(n.Args[0]) {
					if ser, ok := s[name]; ok && !ser.counter {
						errs = append(errs, fmt.Errorf("%s(%s): %s is not a counter (%s)", n.Func.Name, name, name, ser.family))
					}
				}
			case "histogram_quantile":
				for _, name := range selected(n.Args[1]) {
					if ser, ok := s[name]; ok && !ser.bucket {
						errs = append(errs, fmt.Errorf("histogram_quantile over %s: not a histogram's _bucket", name))
					}
				}
				if known(s, n.Args[1]) && !labelsOf(s, n.Args[1])["le"] {
					errs = append(errs, fmt.Errorf("histogram_quantile over %s: le is aggregated away", n.Args[1]))
				}
			}
		}
		return nil
	})
	return errs
}

// selected lists the series names e's selectors name.
func selected(e parser.Expr) []string {
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			names = append(names, vs.Name)
		}
		return nil
	})
	return names
}

// known reports whether the host serves every series e names.
func known(s map[string]series, e parser.Expr) bool {
	return !slices.ContainsFunc(selected(e), func(name string) bool { _, ok := s[name]; return !ok })
}

// labelsOf is the labels the series of e's result may have, as far as this test follows PromQL.
func labelsOf(s map[string]series, e parser.Expr) map[string]bool {
	switch e := e.(type) {
	case *parser.VectorSelector:
		return s[e.Name].labels
	case *parser.MatrixSelector:
		return labelsOf(s, e.VectorSelector)
	case *parser.ParenExpr:
		return labelsOf(s, e.Expr)
	case *parser.SubqueryExpr:
		return labelsOf(s, e.Expr)
	case *parser.UnaryExpr:
		return labelsOf(s, e.Expr)
	case *parser.StepInvariantExpr:
		return labelsOf(s, e.Expr)
	case *parser.AggregateExpr:
		inner, out := labelsOf(s, e.Expr), map[string]bool{}
		switch {
		case e.Op == parser.TOPK || e.Op == parser.BOTTOMK || e.Op == parser.LIMITK || e.Op == parser.LIMIT_RATIO:
			return inner
		case e.Without:
			for l := range inner {
				out[l] = !slices.Contains(e.Grouping, l)
			}
		default:
			for _, l := range e.Grouping {
				out[l] = true
			}
		}
		if p, ok := e.Param.(*parser.StringLiteral); ok && e.Op == parser.COUNT_VALUES {
			out[p.Val] = true
		}
		return out
	case *parser.Call:
		out := map[string]bool{}
		for _, a := range e.Args {
			for l := range labelsOf(s, a) {
				out[l] = true
			}
		}
		switch e.Func.Name {
		case "histogram_quantile":
			delete(out, "le")
		case "label_replace", "label_join":
			out[e.Args[1].(*parser.StringLiteral).Val] = true
		}
		return out
	case *parser.BinaryExpr:
		out := map[string]bool{}
		for _, side := range []parser.Expr{e.LHS, e.RHS} {
			for l := range labelsOf(s, side) {
				out[l] = true
			}
		}
		return out
	}
	return nil
}

func list(labels map[string]bool) string {
	var out []string
	for l, ok := range labels {
		if ok {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// The checks above catch what they say they catch.
func TestDashboardChecks(t *testing.T) {
	s := served(t)
	vars := map[string]bool{"plugin": true}
	for _, c := range []struct{ expr, want string }{
		{`sum by (controller) (rate(controller_runtime_reconcile_total{controller=~"$plugin"}[$__rate_interval]))`, ""},
		{`rate(controller_runtime_reconciles_total[5m])`, `"controller_runtime_reconciles_total" is no series the host serves`},
		{`wasmrec_plugin_host_calls`, `"wasmrec_plugin_host_calls" is no series the host serves`},
		{`controller_runtime_reconcile_time_seconds`, `"controller_runtime_reconcile_time_seconds" is no series`},
		{`sum by (plugin) (rate(controller_runtime_reconcile_total[5m]))`, "has no label plugin"},
		{`wasmrec_plugin_instances{controller="p"}`, "wasmrec_plugin_instances has no label controller"},
		{`rate(workqueue_depth[5m])`, "workqueue_depth is not a counter"},
		{`histogram_quantile(0.9, sum by (controller) (rate(controller_runtime_reconcile_time_seconds_bucket[5m])))`, "le is aggregated away"},
		{`histogram_quantile(0.9, rate(controller_runtime_reconcile_time_seconds_count[5m]))`, "not a histogram's _bucket"},
		{`sum(rate(workqueue_adds_total[5m]) / on (plugin) rate(workqueue_retries_total[5m]))`, "has no label plugin"},
		{`wasmrec_plugin_running{plugin=~"$plugins"}`, "$plugins is no template variable"},
		{`sum by (plugin (wasmrec_plugin_running)`, "parse error"},
	} {
		errs := checkQuery(s, vars, c.expr)
		switch {
		case c.want == "" && len(errs) > 0:
			t.Errorf("%s: %v", c.expr, errs)
		case c.want != "" && !slices.ContainsFunc(errs, func(err error) bool { return strings.Contains(err.Error(), c.want) }):
			t.Errorf("%s: want an error with %q, got %v", c.expr, c.want, errs)
		}
	}
	for _, c := range []struct{ q, want string }{
		{`label_values(wasmrec_plugin_running, plugin)`, ""},
		{`label_values(wasmrec_plugin_running, controller)`, "has no label controller"},
		{`label_values(wasmrec_plugin_runs, plugin)`, "is no series the host serves"},
		{`query_result(up)`, "not label_values"},
	} {
		errs := checkVariable(s, vars, c.q)
		switch {
		case c.want == "" && len(errs) > 0:
			t.Errorf("%s: %v", c.q, errs)
		case c.want != "" && !slices.ContainsFunc(errs, func(err error) bool { return strings.Contains(err.Error(), c.want) }):
			t.Errorf("%s: want an error with %q, got %v", c.q, c.want, errs)
		}
	}
}
