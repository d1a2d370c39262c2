package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

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

// runHost loads the plugins of hc and runs them, with extra runnables beside, until ctx is done.
// A plugin that fails to load is reported and left out; the others run. It fails if none loads.
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

	var loadErrs []error
	loaded := 0
	for _, pc := range hc.Plugins {
		p, err := host.LoadFile(ctx, pc)
		if err != nil {
			log.Error(err, "plugin not loaded; the others run")
			loadErrs = append(loadErrs, err)
			continue
		}
		m := p.Module().Manifest()
		log.Info("plugin loaded", "plugin", pc.Name, "digest", p.Module().Digest(), "for", m.For.APIVersion+"/"+m.For.Kind, "module", pc.Module)
		if err := mgr.Add(p); err != nil {
			return err
		}
		loaded++
	}
	if loaded == 0 && len(hc.Plugins) > 0 {
		return fmt.Errorf("no plugin could be loaded: %w", errors.Join(loadErrs...))
	}
	for _, r := range extra {
		if err := mgr.Add(r); err != nil {
			return err
		}
	}
	return mgr.Start(ctx)
}
