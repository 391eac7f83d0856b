package validate

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestRejects: the checks above do fail: an unknown field, a field in the
// wrong case, an unknown kind, a short grace period, a probe on the wrong
// path and a root user are each caught.
func TestRejects(t *testing.T) {
	base, err := os.ReadFile(filepath.Join(manifestDir, "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(string) string{
		"unknown field": func(s string) string {
			return strings.Replace(s, "  replicas: 3\n", "  replicas: 3\n  replica: 3\n", 1)
		},
		"wrong case": func(s string) string {
			return strings.Replace(s, "readinessProbe:", "ReadinessProbe:", 1)
		},
		"unknown kind": func(s string) string {
			return strings.Replace(s, "kind: Deployment", "kind: StatefulSet", 1)
		},
	} {
		var m manifests
		if err := m.add("deployment.yaml", []byte(edit(string(base)))); err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}

	var m manifests
	if err := m.add("deployment.yaml", base); err != nil {
		t.Fatal(err)
	}
	if errs := failures(func(r reporter) { checkDeployment(r, m.deployments[0]) }); len(errs) > 0 {
		t.Fatalf("the deployment as it is fails: %v", errs)
	}
	for name, c := range map[string]struct {
		edit func(*appsv1.Deployment, *corev1.Container)
		want string
	}{
		"short grace": {func(d *appsv1.Deployment, _ *corev1.Container) {
			g := int64(35)
			d.Spec.Template.Spec.TerminationGracePeriodSeconds = &g
		}, "terminationGracePeriodSeconds 35s < drain timeout"},
		"no grace, the default 30s": {func(d *appsv1.Deployment, _ *corev1.Container) {
			d.Spec.Template.Spec.TerminationGracePeriodSeconds = nil
		}, "is not more than the drain timeout"},
		"liveness on /readyz": {func(_ *appsv1.Deployment, c *corev1.Container) {
			c.LivenessProbe.HTTPGet.Path = "/readyz"
		}, `livenessProbe probes "/readyz"`},
		"probe on an undeclared port": {func(_ *appsv1.Deployment, c *corev1.Container) {
			c.ReadinessProbe.HTTPGet.Port = intstr.FromString("metrics")
		}, "declares no port metrics"},
		"root": {func(_ *appsv1.Deployment, c *corev1.Container) {
			zero := int64(0)
			c.SecurityContext.RunAsUser = &zero
		}, "runAsUser is 0"},
		"root allowed": {func(_ *appsv1.Deployment, c *corev1.Container) {
			no := false
			c.SecurityContext.RunAsNonRoot = &no
		}, "runAsNonRoot is not true"},
		"writable root": {func(_ *appsv1.Deployment, c *corev1.Container) {
			c.SecurityContext.ReadOnlyRootFilesystem = nil
		}, "readOnlyRootFilesystem"},
		"loopback": {func(_ *appsv1.Deployment, c *corev1.Container) {
			setEnv(c, "PGSCHED_HTTP_ADDR", "127.0.0.1:9090")
		}, "listens on loopback"},
		"literal database URL": {func(_ *appsv1.Deployment, c *corev1.Container) {
			setEnv(c, "DATABASE_URL", "postgres://u:p@db/app")
		}, "DATABASE_URL must come from a Secret"},
		"drain shorter than a webhook": {func(_ *appsv1.Deployment, c *corev1.Container) {
			setEnv(c, "PGSCHED_DRAIN_TIMEOUT", "5s")
		}, "< PGSCHED_WEBHOOK_TIMEOUT"},
	} {
		var m manifests
		if err := m.add("deployment.yaml", base); err != nil {
			t.Fatal(err)
		}
		d := m.deployments[0]
		c.edit(d, &d.Spec.Template.Spec.Containers[0])
		errs := failures(func(r reporter) { checkDeployment(r, d) })
		if !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, c.want) }) {
			t.Errorf("%s: want a failure containing %q, have %q", name, c.want, errs)
		}
	}
}

func setEnv(c *corev1.Container, name, value string) {
	for i, e := range c.Env {
		if e.Name == name {
			c.Env[i] = corev1.EnvVar{Name: name, Value: value}
			return
		}
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
}

// recorder is a reporter that records; Fatal ends the check by a panic
// that failures recovers.
type recorder struct{ errs []string }

func (r *recorder) Helper() {}

func (r *recorder) Error(args ...any) { r.errs = append(r.errs, fmt.Sprint(args...)) }

func (r *recorder) Errorf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }

func (r *recorder) Fatal(args ...any) { r.Error(args...); panic(fatal{}) }

func (r *recorder) Fatalf(f string, a ...any) { r.Errorf(f, a...); panic(fatal{}) }

func failures(check func(reporter)) (errs []string) {
	r := &recorder{}
	defer func() {
		if p := recover(); p != nil {
			if _, ok := p.(fatal); !ok {
				panic(p)
			}
		}
		errs = r.errs
	}()
	check(r)
	return r.errs
}
