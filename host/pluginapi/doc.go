// Package objects runs the plugins that plugin objects describe: Plugin (namespaced, for
// tenants) and ClusterPlugin (cluster-scoped, for cluster admins), in group wasmrec.dev. It is a
// controller of controllers, built on package plugin's public API alone; each object's plugin
// runs under a plugin.Supervisor.
//
// An object's plugin never acts as the host: it acts as the ServiceAccount its object names, by
// impersonation, for writes, events and reads alike. A Plugin's plugin is confined to the
// Plugin's namespace. The operator's ObjectPolicy bounds every object's settings and sources.
package objects
