// Package rollout decides how a new module version comes in: the steps of its rollout (a
// shadow run, growing canary shares of keys, then all), the figures each version makes over a
// step, whether a step passes, and how a shadow reconcile's writes and result compare with the
// live version's. It runs no module and makes no call: package plugin runs both versions and
// feeds it what happened.
package rollout
