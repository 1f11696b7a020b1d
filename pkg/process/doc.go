// Package process is what every moraine command shares before and around
// its own code: Main (flags, logger, registry, a context that SIGINT or
// SIGTERM ends, the exit code), flags that fall back to MORAINE_*
// environment variables (ParseWithEnv, also used by the tools under
// deploy/cmd; SplitList reads the comma-separated ones), and runtime
// tuning a main applies before anything else (DefaultGOGC,
// DefaultMemoryLimit).
//
// # The shape of a service
//
// Each service's internal/app package (ingest, processor, query,
// delivery) is built the same way, so that its cmd main is one line of
// wiring and tests run the whole service in-process:
//
//   - Config, with DefaultConfig, RegisterFlags and Validate.
//   - New(cfg, Deps) validates, loads its files and builds its parts; it
//     opens no connection. Deps is this package's (query adds a resolver).
//   - (*App).Run(ctx) binds its listeners first, blocks until ctx ends (nil)
//     or a part fails, and returns once everything it started has stopped.
//   - OpsAddr (and query's APIAddr) is the bound address once Run has bound
//     it, "" before: tests listen on 127.0.0.1:0 and read it.
//   - Errors made in an app package start with the service's name
//     ("processor: ..."); errors passed up from another package keep that
//     package's prefix. Readiness messages are keyed by their check's name
//     instead.
//
// What stays with the caller: the service's own flags and its parts;
// logging, metrics and the ops server are package obs.
package process
