package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// author is a plugin author's machine, as far as the tests can make one: an empty folder
// outside this repository, a PATH with wasmrec as `make install` installs it (with etcd and
// kube-apiserver beside it), Go and clang, a module cache of its own, a cache directory of its
// own, and a module proxy that refuses this project's modules, as the public one does while they
// are unpublished: the Go SDK comes from the wasmrec binary or from nowhere.
type author struct {
	t     *testing.T
	home  string // the empty folder
	bin   string // the wasmrec binary, as the PATH finds it
	cache string // the user's cache directory
	env   []string

	mu         sync.Mutex
	transcript bytes.Buffer
}

var (
	installOnce sync.Once
	installDir  string // where `make install` put wasmrec, etcd and kube-apiserver
	installErr  error
	installOut  []byte
)

// installed runs README's `make install` from this clone once, into a folder of the test run's
// own (GOBIN), and returns that folder.
func installed(t *testing.T) string {
	t.Helper()
	installOnce.Do(func() {
		if installDir, installErr = os.MkdirTemp("", "wasmrec-install-"); installErr != nil {
			return
		}
		cmd := exec.Command("make", "--no-print-directory", "install")
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "GOBIN="+installDir)
		installOut, installErr = cmd.CombinedOutput()
	})
	if installErr != nil {
		t.Fatalf("make install: %v\n%s", installErr, installOut)
	}
	return installDir
}

// removeInstalled removes what installed installed; TestMain calls it.
func removeInstalled() {
	if installDir != "" {
		_ = os.RemoveAll(installDir)
	}
}

// refusingProxy answers every request 403, as the public module proxy answers for this project's
// modules while they are unpublished.
func refusingProxy(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "forbidden", http.StatusForbidden)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func newAuthor(t *testing.T) *author {
	t.Helper()
	pathDir := installed(t)
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	must(t, err)
	tmp := t.TempDir()
	a := &author{t: t, home: filepath.Join(tmp, "work"), cache: filepath.Join(tmp, "cache")}
	must(t, os.MkdirAll(a.home, 0o755))
	a.bin = filepath.Join(pathDir, "wasmrec")
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "KUBEBUILDER_ASSETS", "GOFLAGS", "GOWORK", "GOPROXY", "GONOSUMDB", "GONOSUMCHECK", "GONOPROXY", "GOPRIVATE", "GOSUMDB",
			"GOMODCACHE", "XDG_CACHE_HOME", "PATH", "KUBECONFIG":
		default:
			a.env = append(a.env, kv)
		}
	}
	a.env = append(a.env,
		"PATH="+pathDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GOPROXY="+refusingProxy(t),
		"GOFLAGS=-modcacherw", // so that the test can remove its module cache
		"GOMODCACHE="+filepath.Join(tmp, "modcache"),
		"GOCACHE="+strings.TrimSpace(string(gocache)),
		"XDG_CACHE_HOME="+a.cache,
	)
	return a
}

// command makes the command line (words separated by spaces) to run in dir, relative to home.
func (a *author) command(dir, line string, extraEnv ...string) *exec.Cmd {
	words := strings.Fields(line)
	if words[0] == "wasmrec" {
		words[0] = a.bin // exec looks up names in this process's PATH, not in cmd.Env's
	}
	cmd := exec.Command(words[0], words[1:]...)
	cmd.Dir = filepath.Join(a.home, dir)
	cmd.Env = append(append([]string{}, a.env...), extraEnv...)
	return cmd
}

// run runs one step of the journey and records it with its wall time.
func (a *author) run(dir, line string) string {
	a.t.Helper()
	start := time.Now()
	out, err := a.command(dir, line).CombinedOutput()
	a.note("$ %s    (%s)\n", line, time.Since(start).Round(100*time.Millisecond))
	if err != nil {
		a.t.Fatalf("%s (in %s): %v\n%s", line, dir, err, out)
	}
	return string(out)
}

// fails runs a command that must fail and returns its output.
func (a *author) fails(dir, line string, extraEnv ...string) string {
	a.t.Helper()
	out, err := a.command(dir, line, extraEnv...).CombinedOutput()
	if err == nil {
		a.t.Fatalf("%s (in %s) succeeded, want an error:\n%s", line, dir, out)
	}
	return string(out)
}

func (a *author) note(format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	fmt.Fprintf(&a.transcript, format, args...)
}

func (a *author) edit(path, old, new string) {
	a.t.Helper()
	path = filepath.Join(a.home, path)
	b, err := os.ReadFile(path)
	must(a.t, err)
	if !bytes.Contains(b, []byte(old)) {
		a.t.Fatalf("%s lacks %q", path, old)
	}
	must(a.t, os.WriteFile(path, bytes.ReplaceAll(b, []byte(old), []byte(new)), 0o644))
}

// TestAuthorJourney is docs/plugin-authors.md, "Writing a plugin": from an empty folder outside the repository
// to a plugin reconciling an object on the local control plane, for Go (new, go test, build,
// dev) and C (new, test, build, dev), then an edit of the source that dev rebuilds and swaps in. The
// commands and their wall times go to bin/author-journey.txt (make test prints it).
func TestAuthorJourney(t *testing.T) {
	t.Parallel() // see e2e/doc.go: what may run beside others
	if testing.Short() {
		t.Skip("builds plugins and starts a control plane per language")
	}
	readme, err := os.ReadFile("../docs/plugin-authors.md")
	must(t, err)
	// The install the journey uses (newAuthor) is the one the guide gives.
	if !strings.Contains(string(readme), "```sh\nmake install\n```") {
		t.Error("docs/plugin-authors.md lacks `make install` as its install block")
	}
	var transcripts []string
	for _, tc := range []struct {
		lang, name string
		new        string
		steps      []string // run in the plugin's folder, after `wasmrec new`
		source     string   // the file edited to check the rebuild
		value      string   // the annotation's value in it
	}{
		{"go", "hello", "wasmrec new hello --for v1/ConfigMap", []string{"go test ./...", "wasmrec build"}, "main.go", `"true"`},
		{"c", "hello-c", "wasmrec new hello-c --lang c --for v1/ConfigMap", []string{"wasmrec test", "wasmrec build"}, "hello-c.c", `\"true\"`},
	} {
		// docs/plugin-authors.md shows these very commands, in this order.
		block := strings.Join(append(append([]string{tc.new, "cd " + tc.name}, tc.steps...), "wasmrec dev --plugin ."), "\n")
		if !strings.Contains(string(readme), "```sh\n"+block+"\n```") {
			t.Errorf("docs/plugin-authors.md lacks the %s journey as a block of its own:\n%s", tc.lang, block)
		}
		t.Run(tc.lang, func(t *testing.T) {
			a := newAuthor(t)
			a.note("(wasmrec from make install; a fresh module cache; a module proxy that refuses the SDK)\n")
			start := time.Now()
			a.run("", tc.new)
			a.note("$ cd %s\n", tc.name)
			for _, s := range tc.steps {
				a.run(tc.name, s)
			}
			dev := startDev(t, a, tc.name)
			cs := dev.client(t)
			annotation := "wasmrec.dev/" + tc.name
			waitAnnotation := func(want string) {
				t.Helper()
				deadline := time.Now().Add(90 * time.Second)
				for {
					cm, err := cs.CoreV1().ConfigMaps("default").Get(context.Background(), tc.name+"-sample", metav1.GetOptions{})
					if err == nil && cm.Annotations[annotation] == want {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("the sample ConfigMap's %s is not %q after 90s (get: %v)\ndev's output:\n%s", annotation, want, err, dev.output())
					}
					time.Sleep(200 * time.Millisecond)
				}
			}
			waitAnnotation("true")
			a.note("   the plugin reconciled default/%s-sample: %s from the empty folder\n", tc.name, time.Since(start).Round(100*time.Millisecond))

			// An edit of the source: dev builds again and the host swaps the module in.
			edited := time.Now()
			a.edit(filepath.Join(tc.name, tc.source), tc.value, strings.ReplaceAll(tc.value, "true", "v2"))
			waitAnnotation("v2")
			a.note("   edited %s: rebuilt, swapped in and reconciled again in %s\n", tc.source, time.Since(edited).Round(100*time.Millisecond))

			if tc.lang == "go" {
				// A module that asks for more than host.yaml grants is refused (the Plugin is
				// Degraded, the running module stays); granting it in host.yaml applies at once.
				a.edit("hello/main.go", `{Group: "", Resources: []string{"events"}, Verbs: []string{"create"}},`,
					`{Group: "", Resources: []string{"events"}, Verbs: []string{"create"}}, {Group: "", Resources: []string{"secrets"}, Verbs: []string{"get"}},`)
				a.edit("hello/main.go", `"v2"`, `"v3"`)
				waitDegraded(t, dev, "hello", "True")
				a.edit("hello/host.yaml", "      - {group: \"\", resources: [events], verbs: [create]}\n",
					"      - {group: \"\", resources: [events], verbs: [create]}\n      - {group: \"\", resources: [secrets], verbs: [get]}\n")
				granted := time.Now()
				waitAnnotation("v3")
				waitDegraded(t, dev, "hello", "False")
				a.note("   a module asking for secrets was refused until host.yaml granted them; then it ran %s after the edit\n", time.Since(granted).Round(100*time.Millisecond))
			}

			dev.stop(t)
			out := dev.output()
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, "level=ERROR") && !strings.Contains(l, `msg="module swap refused; the current module keeps serving"`) {
					t.Errorf("dev logged an error other than the refusal the test provokes:\n%s", l)
				}
			}
			if last := lastLine(out); !strings.Contains(last, `msg=stopped`) {
				t.Errorf("dev's last line is %q, want the final \"stopped\"", last)
			}
			transcripts = append(transcripts, fmt.Sprintf("== %s\n%s", tc.lang, a.transcript.String()))
		})
	}
	report := "The author journey (e2e TestAuthorJourney), on this machine:\n" + strings.Join(transcripts, "")
	t.Log("\n" + report)
	if err := os.WriteFile("../bin/author-journey.txt", []byte(report), 0o644); err != nil {
		t.Log(err)
	}
}

// devProcess is `wasmrec dev --plugin .` running in a plugin's folder.
type devProcess struct {
	cmd        *exec.Cmd
	out        *syncBuffer
	kubeconfig string
	done       chan error
}

// startDev starts `wasmrec dev --plugin .` in dir, or dev with args instead of --plugin ., and
// waits until it prints where its kubeconfig is.
func startDev(t *testing.T, a *author, dir string, args ...string) *devProcess {
	t.Helper()
	line := "wasmrec dev --plugin ."
	if len(args) > 0 {
		line = "wasmrec dev " + strings.Join(args, " ")
	}
	d := &devProcess{out: &syncBuffer{}, done: make(chan error, 1)}
	d.cmd = a.command(dir, line)
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	started := time.Now()
	must(t, d.cmd.Start())
	a.note("$ %s    (runs until Ctrl-C)\n", line)
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(d.end)
	// dev prints where the kubeconfig is, as `export KUBECONFIG=...`.
	deadline := time.Now().Add(2 * time.Minute)
	for d.kubeconfig == "" {
		for _, l := range strings.Split(d.out.String(), "\n") {
			if k, ok := strings.CutPrefix(strings.TrimSpace(l), "export KUBECONFIG="); ok {
				d.kubeconfig = k
			}
		}
		select {
		case err := <-d.done:
			t.Fatalf("dev exited (%v) before the control plane was up:\n%s", err, d.out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("dev printed no `export KUBECONFIG=` line in 2m:\n%s", d.out.String())
		}
	}
	if !strings.HasPrefix(d.kubeconfig, a.cache) {
		t.Errorf("the kubeconfig is at %s, not under the user's cache directory", d.kubeconfig)
	}
	a.note("   control plane up in %s\n", time.Since(started).Round(100*time.Millisecond))
	return d
}

// waitDegraded waits until the dev plugin's Plugin object has Degraded=status.
func waitDegraded(t *testing.T, d *devProcess, name, status string) {
	t.Helper()
	c, err := clientcmd.BuildConfigFromFlags("", d.kubeconfig)
	must(t, err)
	dc, err := dynamic.NewForConfig(c)
	must(t, err)
	var got string
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if u, err := dc.Resource(pluginGVR).Get(context.Background(), name, metav1.GetOptions{}); err == nil {
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				if m, _ := c.(map[string]any); m["type"] == "Degraded" {
					got, _ = m["status"].(string)
				}
			}
			if got == status {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("Plugin %s: Degraded=%q after 90s, want %q\ndev's output:\n%s", name, got, status, d.output())
}

func (d *devProcess) client(t *testing.T) kubernetes.Interface {
	t.Helper()
	c, err := clientcmd.BuildConfigFromFlags("", d.kubeconfig)
	must(t, err)
	cs, err := kubernetes.NewForConfig(c)
	must(t, err)
	return cs
}

// stop interrupts dev as Ctrl-C does and waits for it to exit cleanly.
func (d *devProcess) stop(t *testing.T) {
	t.Helper()
	must(t, d.cmd.Process.Signal(syscall.SIGINT))
	select {
	case err := <-d.done:
		if err != nil {
			t.Errorf("dev exited with %v after Ctrl-C:\n%s", err, d.output())
		}
	case <-time.After(time.Minute):
		t.Fatalf("dev still running a minute after Ctrl-C:\n%s", d.output())
	}
}

func (d *devProcess) output() string { return d.out.String() }

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestBuildMistakes: each usual way of building a plugin wrongly gets an error that says what
// to do, from inspect, build or new, with nothing else printed.
func TestBuildMistakes(t *testing.T) {
	t.Parallel() // see e2e/doc.go: what may run beside others
	if testing.Short() {
		t.Skip("builds Go modules")
	}
	a := newAuthor(t)
	a.run("", "wasmrec new oops --for v1/ConfigMap")
	// inspect of a module the host refuses prints the error alone.
	inspect := func(file string) string {
		t.Helper()
		cmd := a.command("oops", "wasmrec inspect "+file)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err == nil {
			t.Fatalf("inspect %s succeeded:\n%s", file, &stdout)
		}
		if stdout.Len() > 0 {
			t.Errorf("inspect %s printed more than its error:\n%s", file, &stdout)
		}
		return stderr.String()
	}
	for _, tc := range []struct {
		name, build string
		env         []string
		want        []string
	}{
		{"no -buildmode=c-shared", "go build -o command.wasm .", []string{"GOOS=wasip1", "GOARCH=wasm"},
			[]string{"built as a WASI command (it exports _start, not _initialize)", "Go needs -buildmode=c-shared"}},
		{"no GOOS=wasip1", "go build -o native.wasm .", nil,
			[]string{"an ELF executable, built for this machine: GOOS=wasip1 GOARCH=wasm is missing"}},
		{"GOOS=js", "go build -o js.wasm .", []string{"GOOS=js", "GOARCH=wasm"},
			[]string{"built with GOOS=js, for browsers", "GOOS=wasip1 GOARCH=wasm -buildmode=c-shared"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if out, err := a.command("oops", tc.build, tc.env...).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", tc.build, err, out)
			}
			got := inspect(strings.Fields(tc.build)[3])
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("inspect says:\n%s\nwant %q", got, w)
				}
			}
		})
	}
	t.Run("Register in main", func(t *testing.T) {
		a.run("", "wasmrec new inmain")
		a.edit("inmain/main.go", "// main is never run: the host calls Reconcile.\nfunc main() {}\n", "")
		a.edit("inmain/main.go", "func init() {\n\twasmrec.Register(", "func main() {\n\twasmrec.Register(")
		got := a.fails("inmain", "wasmrec build")
		if !strings.Contains(got, "the plugin panicked: wasmrec: no reconciler registered: call wasmrec.Register from init") {
			t.Errorf("build says:\n%s\nwant the SDK's panic message", got)
		}
	})
	t.Run("kind typo", func(t *testing.T) {
		got := a.fails("", "wasmrec new typo --for v1/ConfigMaps")
		if !strings.Contains(got, "v1 has no kind ConfigMaps: did you mean ConfigMap?") {
			t.Errorf("new says:\n%s", got)
		}
		a.run("", "wasmrec new typo")
		a.edit("typo/main.go", `Kind: "ConfigMap"}`, `Kind: "ConfigMaps"}`)
		got = a.fails("typo", "wasmrec build")
		if !strings.Contains(got, "watches ConfigMaps.v1, which no API server serves: v1 has no kind ConfigMaps: did you mean ConfigMap?") {
			t.Errorf("build says:\n%s", got)
		}
	})
	t.Run("no clang", func(t *testing.T) {
		a.run("", "wasmrec new cplug --lang c")
		got := a.fails("cplug", "wasmrec build", "PATH="+filepath.Dir(a.bin))
		if !strings.Contains(got, "clang is not on PATH: C plugins need clang, lld and wasi-libc") {
			t.Errorf("build without clang says:\n%s", got)
		}
	})
}

// syncBuffer is a bytes.Buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
