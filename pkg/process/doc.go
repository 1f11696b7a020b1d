// Package process is what every moraine command shares before and around
// its own code: Main (flags, logger, registry, a context that SIGINT or
// SIGTERM ends, the exit code), flags that fall back to MORAINE_*
// environment variables (ParseWithEnv, also used by the tools under
// deploy/cmd), and runtime tuning a main applies before anything else
// (DefaultGOGC, DefaultMemoryLimit).
//
// What stays with the caller: the service's own flags and its run
// function; logging, metrics and the ops server are package obs.
package process
