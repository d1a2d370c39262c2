// Package crd installs CustomResourceDefinitions from YAML files and waits until the API server
// serves them, with errors that name the CRD and the condition that held it back.
package crd
