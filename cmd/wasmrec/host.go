package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"

	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/wasm"
)

// hostOptions are the flags run and dev share.
type hostOptions struct {
	cacheDir string
	verbose  int
}

func (o *hostOptions) logger(w io.Writer) logr.Logger {
	return logr.FromSlogHandler(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.Level(-o.verbose)}))
}

// runHost runs the plugins of hc, with extra runnables beside, until ctx is done. The manager
// starts at once and each plugin joins it as soon as it has loaded, so small plugins reconcile
// while a large one still compiles. A plugin that fails to load is reported and left out; runHost
// fails if none loads.
func runHost(ctx context.Context, cfg *rest.Config, hc *plugin.HostConfig, o *hostOptions, log logr.Logger, extra ...manager.Runnable) error {
	mgr, err := manager.New(cfg, manager.Options{Logger: log.WithName("manager")})
	if err != nil {
		return err
	}
	engine, err := wasm.NewEngine(wasm.EngineOptions{CacheDir: o.cacheDir})
	if err != nil {
		return err
	}
	defer engine.Close(context.WithoutCancel(ctx))
	host, err := plugin.NewHost(mgr, engine, log.WithName("plugin"))
	if err != nil {
		return err
	}
	defer host.Close()
	for _, r := range extra {
		if err := mgr.Add(r); err != nil {
			return err
		}
	}

	mctx, stop := context.WithCancel(ctx)
	defer stop()
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(mctx) }()

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		loadErrs []error
		loaded   int
	)
	for _, pc := range hc.Plugins {
		wg.Go(func() {
			p, err := host.LoadFile(mctx, pc)
			if err == nil {
				err = mgr.Add(p)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if mctx.Err() == nil {
					log.Error(err, "plugin not loaded; the others run")
				}
				loadErrs = append(loadErrs, err)
				return
			}
			loaded++
			m := p.Module().Manifest()
			log.Info("plugin loaded", "plugin", pc.Name, "digest", p.Module().Digest(), "for", m.For.APIVersion+"/"+m.For.Kind, "module", pc.Module)
		})
	}
	wg.Wait()
	if loaded == 0 && len(hc.Plugins) > 0 && mctx.Err() == nil {
		stop()
		return errors.Join(fmt.Errorf("no plugin could be loaded: %w", errors.Join(loadErrs...)), <-stopped)
	}
	return <-stopped
}
