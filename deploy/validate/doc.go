// Package validate checks the Kubernetes manifests in deploy/kubernetes
// offline, with no cluster and no kubectl: its test decodes every document
// strictly into the typed object of its kind and checks what pgsched needs
// of a deployment (probes, a non-root and locked-down security context, a
// PodDisruptionBudget and Service that select the workers, and a
// termination grace period longer than the worker's drain).
//
// It is a module of its own so that the Kubernetes API packages stay out of
// pgsched's go.mod. Run it with
//
//	(cd deploy/validate && go test ./...)
package validate
