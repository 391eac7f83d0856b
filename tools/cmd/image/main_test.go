package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/tools/internal/ociimage"
	"github.com/pgsched/pgsched/tools/internal/rootmodule"
)

// untar reads every regular file of a tar into a map by name.
func untar(t *testing.T, r io.Reader) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		require.NoError(t, err)
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[h.Name] = data
	}
}

// blob returns the archive's blob for d, checking its digest and size.
func blob(t *testing.T, archive map[string][]byte, d ociimage.Descriptor) []byte {
	t.Helper()
	hexSum, ok := strings.CutPrefix(d.Digest, "sha256:")
	require.True(t, ok, "digest %q is sha256", d.Digest)
	data, ok := archive["blobs/sha256/"+hexSum]
	require.True(t, ok, "archive holds blob %s", d.Digest)
	sum := sha256.Sum256(data)
	require.Equal(t, hexSum, hex.EncodeToString(sum[:]))
	require.Equal(t, d.Size, int64(len(data)))
	return data
}

// TestImage builds the worker image the way `make image` does (one go
// build), then reads the archive back as a registry client would: index,
// manifest, config and layer all match their digests; the config runs as a
// non-root numeric user, with the worker as its entrypoint, its HTTP port
// exposed and listening beyond loopback, no secret in its environment, and
// the version label given; the layer holds the binary, the operator CLI,
// /etc/passwd naming that user, and no zoneinfo (the binary carries its
// own). The extracted binaries are static and print their versions.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/worker")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "dist", "pgsched-worker.oci.tar")
	var log bytes.Buffer
	err := run(ctx, []string{"-out", out, "-version", "v9.8.7-test", "-arch", runtime.GOARCH}, &log)
	require.NoError(t, err, log.String())
	require.Contains(t, log.String(), "wrote OCI archive")

	f, err := os.Open(out)
	require.NoError(t, err)
	defer f.Close()
	archive := untar(t, f)
	require.JSONEq(t, `{"imageLayoutVersion":"1.0.0"}`, string(archive["oci-layout"]))

	var index ociimage.Index
	require.NoError(t, json.Unmarshal(archive["index.json"], &index))
	require.Len(t, index.Manifests, 1)
	md := index.Manifests[0]
	require.Equal(t, "v9.8.7-test", md.Annotations[ociimage.AnnotationRefName])
	require.Equal(t, "linux", md.Platform.OS)
	require.Equal(t, runtime.GOARCH, md.Platform.Architecture)

	var m ociimage.Manifest
	require.NoError(t, json.Unmarshal(blob(t, archive, md), &m))
	require.Len(t, m.Layers, 1)

	var cfg ociimage.ConfigFile
	require.NoError(t, json.Unmarshal(blob(t, archive, m.Config), &cfg))
	user := cfg.Config.User
	require.NotEmpty(t, user)
	require.NotContains(t, []string{"0", "root", "0:0", "root:root"}, user)
	require.True(t, ociimage.NonRootUser(user), "config user %q is not root", user)
	require.Equal(t, "65532:65532", user, "numeric, so runAsNonRoot can check it")
	require.Equal(t, []string{binaryPath}, cfg.Config.Entrypoint)
	require.Contains(t, cfg.Config.ExposedPorts, "9090/tcp")
	require.Contains(t, cfg.Config.Env, "PGSCHED_HTTP_ADDR=:9090")
	for _, e := range cfg.Config.Env {
		name, _, _ := strings.Cut(e, "=")
		require.NotRegexp(t, `(?i)secret|password|token|DATABASE_URL`, name, "no secrets in the image config")
	}
	require.Equal(t, "v9.8.7-test", cfg.Config.Labels["org.opencontainers.image.version"])
	require.Equal(t, sourceURL, cfg.Config.Labels["org.opencontainers.image.source"])
	require.Equal(t, "linux", cfg.OS)
	require.Equal(t, runtime.GOARCH, cfg.Architecture)

	zr, err := gzip.NewReader(bytes.NewReader(blob(t, archive, m.Layers[0])))
	require.NoError(t, err)
	raw, err := io.ReadAll(zr)
	require.NoError(t, err)
	sum := sha256.Sum256(raw)
	require.Equal(t, []string{"sha256:" + hex.EncodeToString(sum[:])}, cfg.RootFS.DiffIDs)
	layer := untar(t, bytes.NewReader(raw))
	require.Contains(t, string(layer["etc/passwd"]), "nonroot:x:65532:65532:")
	require.Contains(t, string(layer["etc/group"]), "nonroot:x:65532:")
	for name := range layer {
		require.False(t, strings.HasPrefix(name, "usr/share/zoneinfo"), "no zoneinfo in the image: %s", name)
	}
	worker, ok := layer[strings.TrimPrefix(binaryPath, "/")]
	require.True(t, ok, "layer holds %s", binaryPath)

	if runtime.GOOS != "linux" {
		t.Skip("the image's binary is for linux")
	}
	bin := filepath.Join(t.TempDir(), "pgsched-worker")
	require.NoError(t, os.WriteFile(bin, worker, 0o755))
	cmd := exec.CommandContext(ctx, bin, "-version")
	// As in the image: no HOME, no DATABASE_URL, nothing from this machine.
	cmd.Env = []string{"PATH=/nonexistent"}
	cmd.Dir = t.TempDir()
	outBytes, err := cmd.CombinedOutput()
	require.NoError(t, err, "the image's binary runs -version and exits 0: %s", outBytes)
	require.Regexp(t, `^pgsched worker \S+.* go1\.\d+`, string(outBytes))

	cli, ok := layer[strings.TrimPrefix(cliPath, "/")]
	require.True(t, ok, "layer holds %s", cliPath)
	bin = filepath.Join(t.TempDir(), "pgsched")
	require.NoError(t, os.WriteFile(bin, cli, 0o755))
	cmd = exec.CommandContext(ctx, bin, "version")
	cmd.Env = []string{"PATH=/nonexistent"}
	cmd.Dir = t.TempDir()
	outBytes, err = cmd.CombinedOutput()
	require.NoError(t, err, "the image's CLI runs version and exits 0: %s", outBytes)
	require.Regexp(t, `^pgsched \S+.* go1\.\d+`, string(outBytes))
}

// TestWorkerEmbedsTZData: cmd/worker links time/tzdata, since the image has
// no /usr/share/zoneinfo.
func TestWorkerEmbedsTZData(t *testing.T) {
	t.Parallel()
	root, err := rootmodule.Dir()
	require.NoError(t, err)
	cmd := exec.Command("go", "list", "-deps", workerPackage)
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err)
	require.Contains(t, strings.Fields(string(out)), "time/tzdata")
}

func TestBinaryVersion(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		main     string
		settings map[string]string
		want     string
	}{
		{"v1.2.3", nil, "v1.2.3"},
		{"(devel)", nil, "(devel)"},
		{"", map[string]string{"vcs.revision": "0123456789abcdef", "vcs.modified": "true"}, "(devel) 0123456789ab+dirty"},
		{"(devel)", map[string]string{"vcs.revision": "0123456789abcdef", "vcs.modified": "false"}, "(devel) 0123456789ab"},
	} {
		info := &debug.BuildInfo{}
		info.Main.Version = c.main
		for k, v := range c.settings {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: k, Value: v})
		}
		got, _ := binaryVersion(info)
		require.Equal(t, c.want, got)
	}
	require.True(t, tagPattern.MatchString("v1.2.3"))
	require.False(t, tagPattern.MatchString("(devel) 0123"))
	require.False(t, tagPattern.MatchString("v0.0.0-2025+dirty"))
}
