// Command image builds the worker's container image without a Docker
// daemon and without pulling a base image. In tools/, the tools' module:
//
//	go run ./cmd/image [-out dist/pgsched-worker.oci.tar] [-layout DIR] [-version v1.2.3]
//
// (make image runs it with -out ../dist/pgsched-worker.oci.tar, into the
// repository's dist/.) It compiles cmd/worker, and the operator CLI
// cmd/pgsched, as static binaries (CGO_ENABLED=0, -trimpath) for
// linux/-arch and writes an OCI archive (-out; `skopeo copy
// oci-archive:FILE docker://REF` pushes it) and, with -layout, the same
// image as an OCI layout directory (`crane push DIR REF`). The image holds
// the worker at /usr/local/bin/pgsched-worker (the entrypoint), the CLI at
// /usr/local/bin/pgsched (for kubectl exec), the host's CA bundle (for
// https webhooks) when it has one, and /etc/passwd and /etc/group naming
// the user it runs as, 65532 (nonroot). Time zone data is compiled into the
// binary (cmd/worker/tzdata.go). The same sources and Go toolchain give the
// same image digest.
//
// The worker's -version comes from the binary's build information (module
// version, else the commit), not from a linker flag; -version here sets the
// image's org.opencontainers.image.version label and its tag in the
// archive's index, and defaults to what the binary reports.
package main

import (
	"context"
	"debug/buildinfo"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pgsched/pgsched/tools/internal/ociimage"
	"github.com/pgsched/pgsched/tools/internal/rootmodule"
)

const (
	workerPackage = "github.com/pgsched/pgsched/cmd/worker"
	binaryPath    = "/usr/local/bin/pgsched-worker"
	cliPackage    = "github.com/pgsched/pgsched/cmd/pgsched"
	cliPath       = "/usr/local/bin/pgsched"
	caBundlePath  = "/etc/ssl/certs/ca-certificates.crt"
	sourceURL     = "https://github.com/pgsched/pgsched"

	// The user the image runs as: numeric, so Kubernetes' runAsNonRoot can
	// check it without reading /etc/passwd.
	userName = "nonroot"
	uid      = 65532
	gid      = 65532
	home     = "/home/nonroot"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	flags := flag.NewFlagSet("image", flag.ContinueOnError)
	flags.SetOutput(stderr)
	defaultArch := os.Getenv("GOARCH")
	if defaultArch == "" {
		defaultArch = runtime.GOARCH
	}
	out := flags.String("out", "dist/pgsched-worker.oci.tar", "OCI archive to write; empty writes none")
	layout := flags.String("layout", "", "also write the image as an OCI layout directory (for crane push)")
	version := flags.String("version", "", "image version label and tag (default: the worker binary's version)")
	arch := flags.String("arch", defaultArch, "GOARCH of the image (linux only)")
	port := flags.Int("port", 9090, "the worker's HTTP port, for PGSCHED_HTTP_ADDR and ExposedPorts")
	caBundle := flags.String("ca-certs", caBundlePath, "CA bundle copied into the image at "+caBundlePath+", when the file exists")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	if *out == "" && *layout == "" {
		return errors.New("nothing to write: set -out or -layout")
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))

	tmp, err := os.MkdirTemp("", "pgsched-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	root, err := rootmodule.Dir()
	if err != nil {
		return err
	}
	bin := filepath.Join(tmp, "pgsched-worker")
	if err := build(ctx, root, bin, workerPackage, *arch, stderr, logger); err != nil {
		return err
	}
	binData, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	// The operator CLI beside it: `kubectl exec` into a worker's pod runs
	// it with the worker's DATABASE_URL and PGSCHED_SCHEMA.
	cliBin := filepath.Join(tmp, "pgsched")
	if err := build(ctx, root, cliBin, cliPackage, *arch, stderr, logger); err != nil {
		return err
	}
	cliData, err := os.ReadFile(cliBin)
	if err != nil {
		return err
	}

	files := append([]ociimage.File{
		{Path: binaryPath, Mode: 0o755, Data: binData},
		{Path: cliPath, Mode: 0o755, Data: cliData},
		ociimage.Dir("/tmp", 0o777|fs.ModeSticky, 0, 0),
	}, ociimage.AccountFiles(userName, uid, gid, home)...)
	switch ca, err := os.ReadFile(*caBundle); {
	case err == nil:
		files = append(files, ociimage.File{Path: caBundlePath, Mode: 0o644, Data: ca})
	case errors.Is(err, os.ErrNotExist):
		logger.Warn("no CA bundle on this machine; https webhooks in the image will fail certificate checks", "path", *caBundle)
	default:
		return fmt.Errorf("CA bundle: %w", err)
	}

	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("reading the worker's build info: %w", err)
	}
	v, rev := binaryVersion(info)
	if *version != "" {
		v = *version
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "pgsched-worker",
		"org.opencontainers.image.description": "pgsched worker: claims due tasks and delivers them to HTTP webhooks",
		"org.opencontainers.image.version":     v,
		"org.opencontainers.image.source":      sourceURL,
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
	if rev != "" {
		labels["org.opencontainers.image.revision"] = rev
	}
	refName := "latest"
	if tagPattern.MatchString(v) {
		refName = v
	}
	img, err := ociimage.Build(ociimage.Image{
		Files:        files,
		OS:           "linux",
		Architecture: *arch,
		Variant:      variant(*arch),
		User:         strconv.Itoa(uid) + ":" + strconv.Itoa(gid),
		Entrypoint:   []string{binaryPath},
		// Nothing secret: the config is readable by anyone who can pull the
		// image. DATABASE_URL and webhook secrets come from the deployment.
		Env: []string{
			"PATH=/usr/local/bin:/usr/bin:/bin",
			// The worker's default, 127.0.0.1, is unreachable from outside
			// the container: probes and Prometheus need every interface.
			"PGSCHED_HTTP_ADDR=:" + strconv.Itoa(*port),
		},
		WorkingDir:   "/",
		ExposedPorts: []string{strconv.Itoa(*port) + "/tcp"},
		Labels:       labels,
		RefName:      refName,
	})
	if err != nil {
		return err
	}
	if *out != "" {
		if err := img.WriteArchiveFile(*out); err != nil {
			return fmt.Errorf("writing %s: %w", *out, err)
		}
		logger.Info("wrote OCI archive", "path", *out, "digest", img.Manifest.Digest, "tag", refName, "version", v, "arch", *arch)
	}
	if *layout != "" {
		if err := img.WriteLayout(*layout); err != nil {
			return fmt.Errorf("writing %s: %w", *layout, err)
		}
		logger.Info("wrote OCI layout", "dir", *layout, "digest", img.Manifest.Digest, "tag", refName, "version", v, "arch", *arch)
	}
	return nil
}

// tagPattern is what an image tag may be (OCI distribution spec).
var tagPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)

// build compiles pkg (cmd/worker, cmd/pgsched) for linux/arch into bin: static (no cgo,
// so no libc in the image), with no local paths (-trimpath) and without the
// symbol table and DWARF (-s -w; stack traces keep their function names).
// It builds in the library's module, root, not in this one: the binary's
// build info then names pgsched as the main module, and its -version (and
// so the image's version label) reports the commit.
func build(ctx context.Context, root, bin, pkg, arch string, stderr io.Writer, logger *slog.Logger) error {
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %s for linux/%s: %w", pkg, arch, err)
	}
	logger.Info("built", "package", pkg, "arch", arch, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// binaryVersion is the version the worker's -version prints (see the root
// package's Version), read from the binary's build info, and the commit
// when the build recorded one.
func binaryVersion(info *buildinfo.BuildInfo) (version, revision string) {
	dirty := ""
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v, revision
	}
	if revision == "" {
		return "(devel)", ""
	}
	return "(devel) " + strings.TrimSpace(revision[:min(12, len(revision))]) + dirty, revision
}

// variant is the platform variant registries expect for arch, if any.
func variant(arch string) string {
	switch arch {
	case "arm64":
		return "v8"
	case "arm":
		if v := os.Getenv("GOARM"); v != "" {
			return "v" + strings.TrimSuffix(strings.TrimSuffix(v, ",softfloat"), ",hardfloat")
		}
		return "v7"
	}
	return ""
}
