// Package pluginobjects reconciles plugin objects: the Plugin (namespaced, for tenants) and
// ClusterPlugin (cluster-scoped, for cluster admins) kinds of group wasmrec.dev, with their CRDs
// and admission policy, and the controller that runs the plugins those objects describe. It is a controller of
// controllers, built on package plugin's public API alone; each object's plugin runs under a
// plugin.Supervisor.
//
// An object's plugin never acts as the host: it acts as the ServiceAccount its object names, by
// impersonation, for writes, events and reads alike. A Plugin's plugin is confined to the
// Plugin's namespace. The operator's ObjectPolicy bounds every object's settings and sources.
package pluginobjects
