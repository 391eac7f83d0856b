package validate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	manifestDir = "../kubernetes"
	workerDir   = "../../cmd/worker"
	rootConfig  = "../../config.go"

	// stopSlack is how much longer than its drain timeout a stopping worker
	// may take (cmd/worker): Stop is given the drain timeout plus
	// 10s (announcing the leave takes up to 5s of that), then the HTTP
	// server up to 5s to shut down.
	stopSlack = 15 * time.Second

	// k8sDefaultGrace is terminationGracePeriodSeconds when a pod sets none.
	k8sDefaultGrace = 30 * time.Second
)

// kustomization is the part of a kustomization.yaml these manifests use;
// decoding it strictly fails on any other field, so a new one is added
// here on purpose.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
		Digest  string `json:"digest,omitempty"`
	} `json:"images,omitempty"`
}

type manifests struct {
	deployments   []*appsv1.Deployment
	pdbs          []*policyv1.PodDisruptionBudget
	services      []*corev1.Service
	kustomization *kustomization
	files         []string // the YAML files, bar kustomization.yaml
}

// strictCodec decodes like the API server with field validation Strict:
// unknown and duplicate fields fail, and field names match case-sensitively
// (encoding/json, under sigs.k8s.io/yaml, would accept "ReadinessProbe").
var strictCodec = func() *kjson.Serializer {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{appsv1.AddToScheme, policyv1.AddToScheme, corev1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	return kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme, kjson.SerializerOptions{Yaml: true, Strict: true})
}()

// load reads every YAML document in deploy/kubernetes into its typed
// object, failing on unknown kinds and on fields the type lacks.
func load(t *testing.T) manifests {
	t.Helper()
	var m manifests
	paths, err := filepath.Glob(filepath.Join(manifestDir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		name := filepath.Base(p)
		switch filepath.Ext(name) {
		case ".yaml", ".yml":
		default:
			continue
		}
		if name != "kustomization.yaml" {
			m.files = append(m.files, name)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(f))
		for i := 1; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if err := m.add(name, doc); err != nil {
				t.Errorf("%s, document %d: %v", name, i, err)
			}
		}
		f.Close()
	}
	if len(m.files) == 0 {
		t.Fatalf("no manifests in %s", manifestDir)
	}
	return m
}

func (m *manifests) add(file string, doc []byte) error {
	var probe map[string]any
	if err := yaml.Unmarshal(doc, &probe); err != nil {
		return err
	}
	if len(probe) == 0 {
		return nil // comments only
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	var obj any
	switch gvk := tm.APIVersion + ", Kind=" + tm.Kind; gvk {
	case "apps/v1, Kind=Deployment":
		d := &appsv1.Deployment{}
		m.deployments, obj = append(m.deployments, d), d
	case "policy/v1, Kind=PodDisruptionBudget":
		p := &policyv1.PodDisruptionBudget{}
		m.pdbs, obj = append(m.pdbs, p), p
	case "v1, Kind=Service":
		s := &corev1.Service{}
		m.services, obj = append(m.services, s), s
	case "kustomize.config.k8s.io/v1beta1, Kind=Kustomization":
		if file != "kustomization.yaml" || m.kustomization != nil {
			return errors.New("a Kustomization belongs alone in kustomization.yaml")
		}
		m.kustomization = &kustomization{}
		return yaml.UnmarshalStrict(doc, m.kustomization)
	default:
		return fmt.Errorf("unexpected kind %q: add a case for it to this test", gvk)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return fmt.Errorf("%s %s: %w", tm.Kind, tm.APIVersion, err)
	}
	if _, _, err := strictCodec.Decode(doc, nil, nil); err != nil {
		return fmt.Errorf("%s %s (strict, case-sensitive): %w", tm.Kind, tm.APIVersion, err)
	}
	return nil
}

// TestManifests: deploy/kubernetes decodes strictly and deploys the worker
// the way pgsched needs (see the checks below).
func TestManifests(t *testing.T) {
	m := load(t)
	if len(m.deployments) != 1 || len(m.pdbs) != 1 || len(m.services) != 1 {
		t.Fatalf("want one Deployment, one PodDisruptionBudget and one Service; have %d, %d and %d",
			len(m.deployments), len(m.pdbs), len(m.services))
	}
	d, pdb, svc := m.deployments[0], m.pdbs[0], m.services[0]

	for _, o := range []metav1.Object{d, pdb, svc} {
		if o.GetNamespace() != "" {
			t.Errorf("%s sets namespace %q; the manifests are namespace-agnostic (kubectl -n, or an overlay)", o.GetName(), o.GetNamespace())
		}
	}

	t.Run("Deployment", func(t *testing.T) { checkDeployment(t, d) })

	podLabels := labels.Set(d.Spec.Template.Labels)
	t.Run("PodDisruptionBudget", func(t *testing.T) {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || pdb.Spec.Selector == nil || sel.Empty() {
			t.Fatalf("selector %v: %v; an empty one would select every pod in the namespace", pdb.Spec.Selector, err)
		}
		if !sel.Matches(podLabels) {
			t.Errorf("selector %s does not match the Deployment's pod labels %s", sel, podLabels)
		}
		if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.String() != "1" || pdb.Spec.MinAvailable != nil {
			t.Errorf("want maxUnavailable: 1 (and no minAvailable), have maxUnavailable %v, minAvailable %v",
				pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
		}
		if r := d.Spec.Replicas; r != nil && *r < 2 {
			t.Errorf("with %d replica(s), maxUnavailable 1 lets a drain stop every worker", *r)
		}
	})

	t.Run("Service", func(t *testing.T) {
		if len(svc.Spec.Selector) == 0 {
			t.Fatal("no selector: the Service would have no endpoints (or select everything)")
		}
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
			t.Errorf("selector %v does not match the Deployment's pod labels %s", svc.Spec.Selector, podLabels)
		}
		c := workerContainer(t, d)
		for _, p := range svc.Spec.Ports {
			target := p.TargetPort
			if target.Type == intstr.Int && target.IntVal == 0 {
				target = intstr.FromInt32(p.Port)
			}
			if _, err := containerPort(c, target); err != nil {
				t.Errorf("port %s: %v", p.Name, err)
			}
		}
	})

	t.Run("kustomization", func(t *testing.T) {
		k := m.kustomization
		if k == nil {
			t.Fatal("no kustomization.yaml")
		}
		got, want := slices.Sorted(slices.Values(k.Resources)), m.files
		if !slices.Equal(got, want) {
			t.Errorf("resources %v, want every manifest in the directory: %v", got, want)
		}
		image, _, _ := strings.Cut(workerContainer(t, d).Image, ":")
		for _, img := range k.Images {
			if img.Name != image {
				t.Errorf("images: %q is not the Deployment's image %q", img.Name, image)
			}
		}
	})
}

func workerContainer(t reporter, d *appsv1.Deployment) *corev1.Container {
	t.Helper()
	cs := d.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("want one container in the worker pod, have %d", len(cs))
	}
	return &cs[0]
}

// containerPort resolves a probe's or a Service's port, by name or number,
// to one the container declares.
func containerPort(c *corev1.Container, port intstr.IntOrString) (int32, error) {
	for _, p := range c.Ports {
		if (port.Type == intstr.String && p.Name == port.StrVal) || (port.Type == intstr.Int && p.ContainerPort == port.IntVal) {
			return p.ContainerPort, nil
		}
	}
	return 0, fmt.Errorf("container %s declares no port %s", c.Name, port.String())
}

func checkDeployment(t reporter, d *appsv1.Deployment) {
	spec := d.Spec.Template.Spec
	c := workerContainer(t, d)

	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("selector %v must be non-empty and match the pod template's labels %v (%v)", d.Spec.Selector, d.Spec.Template.Labels, err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Errorf("replicas %v: run at least two workers, so one can stand in for another", d.Spec.Replicas)
	}
	if c.Image == "" {
		t.Error("no image")
	}

	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		if _, dup := env[e.Name]; dup {
			t.Errorf("env %s is set twice", e.Name)
		}
		env[e.Name] = e
	}

	// The HTTP address: beyond loopback, on the port the probes use.
	addr := ""
	if e, ok := env["PGSCHED_HTTP_ADDR"]; ok {
		addr = e.Value
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("PGSCHED_HTTP_ADDR %q: %v; set it to :PORT (the image does, the worker's own default is loopback)", addr, err)
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		t.Errorf("PGSCHED_HTTP_ADDR %q listens on loopback: probes and Prometheus cannot reach it", addr)
	}
	httpPort, _ := strconv.Atoi(portStr)

	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{
		{"livenessProbe", c.LivenessProbe, "/healthz"},
		{"readinessProbe", c.ReadinessProbe, "/readyz"},
	} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: want an httpGet probe on %s", p.name, p.path)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			t.Errorf("%s probes %q, want %q", p.name, p.probe.HTTPGet.Path, p.path)
		}
		port, err := containerPort(c, p.probe.HTTPGet.Port)
		if err != nil {
			t.Errorf("%s: %v", p.name, err)
		} else if int(port) != httpPort {
			t.Errorf("%s probes port %d, but the worker listens on %s", p.name, port, addr)
		}
	}

	// Secrets come from a Secret, not from the manifest.
	if e := env["DATABASE_URL"]; e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.Value != "" {
		t.Errorf("DATABASE_URL must come from a Secret (valueFrom.secretKeyRef), have %+v", e)
	}
	secretish := regexp.MustCompile(`(?i)secret|password|token|key|DATABASE_URL|WEBHOOKS`)
	for _, e := range c.Env {
		if secretish.MatchString(e.Name) && e.Value != "" {
			t.Errorf("env %s has a literal value; take it from a Secret", e.Name)
		}
	}

	checkSecurity(t, &spec, c)

	// Resources: the scheduler needs requests, and memory needs a limit.
	req, lim := c.Resources.Requests, c.Resources.Limits
	if req.Cpu().IsZero() || req.Memory().IsZero() || lim.Memory().IsZero() {
		t.Errorf("want cpu and memory requests and a memory limit, have requests %v, limits %v", req, lim)
	}

	// Draining: the kubelet must not SIGKILL a worker still draining.
	drain := setting(t, env, "PGSCHED_DRAIN_TIMEOUT")
	grace := k8sDefaultGrace
	if g := spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	if grace <= drain {
		t.Errorf("terminationGracePeriodSeconds %s is not more than the drain timeout %s", grace, drain)
	}
	if grace < drain+stopSlack {
		t.Errorf("terminationGracePeriodSeconds %s < drain timeout %s + %s the worker may take beyond it", grace, drain, stopSlack)
	}
	if webhook := setting(t, env, "PGSCHED_WEBHOOK_TIMEOUT"); drain < webhook {
		t.Errorf("PGSCHED_DRAIN_TIMEOUT %s < PGSCHED_WEBHOOK_TIMEOUT %s: deliveries under way at a stop would be cut off and sent again", drain, webhook)
	}
}

func checkSecurity(t reporter, pod *corev1.PodSpec, c *corev1.Container) {
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("the worker container has no securityContext")
	}
	// The container's setting wins over the pod's.
	pick := func(container, pod *bool) bool {
		if container != nil {
			return *container
		}
		return pod != nil && *pod
	}
	if !pick(sc.RunAsNonRoot, psc.RunAsNonRoot) {
		t.Error("runAsNonRoot is not true")
	}
	uid := psc.RunAsUser
	if sc.RunAsUser != nil {
		uid = sc.RunAsUser
	}
	if uid != nil && *uid == 0 {
		t.Error("runAsUser is 0 (root)")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("privileged")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem is not true")
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
		t.Errorf("capabilities %+v: want drop [ALL] and nothing added", sc.Capabilities)
	}
	seccomp := psc.SeccompProfile
	if sc.SeccompProfile != nil {
		seccomp = sc.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccompProfile %+v, want RuntimeDefault", seccomp)
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Error("the pod shares a host namespace")
	}
}

// setting is a duration variable's value: the Deployment's literal, or
// cmd/worker's default when the Deployment sets none.
func setting(t reporter, env map[string]corev1.EnvVar, name string) time.Duration {
	t.Helper()
	e, ok := env[name]
	if !ok {
		return workerDefault(t, name)
	}
	if e.ValueFrom != nil {
		t.Fatalf("%s comes from %v; set it literally so this test can check it", name, e.ValueFrom)
	}
	d, err := time.ParseDuration(e.Value)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, e.Value, err)
	}
	return d
}

// workerDefault reads the default cmd/worker gives the duration variable
// env, from its source: a flag definition in cmd/worker such as
//
//	dur(&o.drainTimeout, "drain-timeout", "PGSCHED_DRAIN_TIMEOUT", pgsched.DefaultDrainTimeout, "...")
//
// whose default is N*time.Unit or a constant of the root package's
// config.go defined so. This module does not import pgsched, to keep its
// dependencies and pgsched's apart.
func workerDefault(t reporter, env string) time.Duration {
	t.Helper()
	src := workerSource(t)
	m := regexp.MustCompile(`"` + regexp.QuoteMeta(env) + `",\s*([^,]+),`).FindSubmatch(src)
	if m == nil {
		t.Fatalf("%s: no flag definition reading %s; update workerDefault", workerDir, env)
	}
	expr := string(bytes.TrimSpace(m[1]))
	if pkg, name, ok := strings.Cut(expr, "."); ok && pkg != "time" {
		file, ok := constantFiles[pkg]
		if !ok {
			t.Fatalf("default of %s: constant %s of a package workerDefault does not know; update constantFiles", env, expr)
		}
		cfg, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		c := regexp.MustCompile(`(?m)^\s*(?:const\s+)?` + regexp.QuoteMeta(name) + `\s*=\s*(.+?)\s*(//.*)?$`).FindSubmatch(cfg)
		if c == nil {
			t.Fatalf("%s: no constant %s; update workerDefault", file, name)
		}
		expr = string(c[1])
	}
	d, err := parseDurationExpr(expr)
	if err != nil {
		t.Fatalf("default of %s: %v; update workerDefault", env, err)
	}
	return d
}

// constantFiles are where the packages cmd/worker takes defaults from
// define them.
var constantFiles = map[string]string{
	"pgsched": rootConfig,
	"webhook": "../../internal/webhook/webhook.go",
}

// workerSource returns cmd/worker's Go source, its tests left out.
func workerSource(t reporter) []byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(workerDir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var src []byte
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(append(src, b...), '\n')
	}
	if len(src) == 0 {
		t.Fatalf("%s: no Go source", workerDir)
	}
	return src
}

// parseDurationExpr evaluates a Go duration constant of the form
// N*time.Unit (or time.Unit alone).
func parseDurationExpr(expr string) (time.Duration, error) {
	m := regexp.MustCompile(`^(?:(\d+)\s*\*\s*)?time\.(Nanosecond|Microsecond|Millisecond|Second|Minute|Hour)$`).FindStringSubmatch(expr)
	if m == nil {
		return 0, fmt.Errorf("cannot evaluate %q", expr)
	}
	n := int64(1)
	if m[1] != "" {
		var err error
		if n, err = strconv.ParseInt(m[1], 10, 64); err != nil {
			return 0, err
		}
	}
	unit := map[string]time.Duration{
		"Nanosecond": time.Nanosecond, "Microsecond": time.Microsecond, "Millisecond": time.Millisecond,
		"Second": time.Second, "Minute": time.Minute, "Hour": time.Hour,
	}[m[2]]
	return time.Duration(n) * unit, nil
}

// TestWorkerDefaults: the defaults this test falls back on can still be
// read from cmd/worker's source, so a refactoring there fails here rather
// than a deployment without PGSCHED_DRAIN_TIMEOUT going unchecked.
func TestWorkerDefaults(t *testing.T) {
	for env, want := range map[string]time.Duration{
		"PGSCHED_DRAIN_TIMEOUT":   0,
		"PGSCHED_WEBHOOK_TIMEOUT": 0,
	} {
		if got := workerDefault(t, env); got <= want {
			t.Errorf("default of %s is %s", env, got)
		}
	}
	for expr, want := range map[string]time.Duration{
		"10 * time.Second": 10 * time.Second, "30*time.Second": 30 * time.Second, "time.Minute": time.Minute,
	} {
		if got, err := parseDurationExpr(expr); err != nil || got != want {
			t.Errorf("parseDurationExpr(%q) = %s, %v; want %s", expr, got, err, want)
		}
	}
}

// reporter is what the checks need of a *testing.T, so TestRejects can
// collect their failures instead of failing.
type reporter interface {
	Helper()
	Error(args ...any)
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

type fatal struct{}
