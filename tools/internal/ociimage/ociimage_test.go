package ociimage_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgsched/pgsched/tools/internal/ociimage"
)

func tinyImage() ociimage.Image {
	files := append([]ociimage.File{
		{Path: "/usr/local/bin/app", Mode: 0o755, Data: []byte("#!/bin/true\n")},
		{Path: "/etc/ssl/certs/ca-certificates.crt", Data: []byte("not really a certificate\n")},
		ociimage.Dir("/tmp", 0o777|os.ModeSticky, 0, 0),
	}, ociimage.AccountFiles("nonroot", 65532, 65532, "/home/nonroot")...)
	return ociimage.Image{
		Files:        files,
		Architecture: "amd64",
		User:         "65532:65532",
		Entrypoint:   []string{"/usr/local/bin/app"},
		Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		ExposedPorts: []string{"9090/tcp"},
		Labels:       map[string]string{"org.opencontainers.image.version": "v0.0.1"},
		RefName:      "v0.0.1",
	}
}

// readBlob reads blobs/sha256/<hex> of the layout in dir and checks its
// content hashes to its name and its size to the descriptor's.
func readBlob(t *testing.T, dir string, d ociimage.Descriptor) []byte {
	t.Helper()
	algo, hexSum, ok := strings.Cut(d.Digest, ":")
	require.True(t, ok, "digest %q is algorithm:hex", d.Digest)
	require.Equal(t, "sha256", algo)
	data, err := os.ReadFile(filepath.Join(dir, "blobs", "sha256", hexSum))
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	require.Equal(t, hexSum, hex.EncodeToString(sum[:]), "blob content matches its digest")
	require.Equal(t, d.Size, int64(len(data)), "descriptor size matches the blob")
	return data
}

type entry struct {
	hdr  *tar.Header
	data []byte
}

func untar(t *testing.T, r io.Reader) (names []string, entries map[string]entry) {
	t.Helper()
	entries = map[string]entry{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names, entries
		}
		require.NoError(t, err)
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		names = append(names, h.Name)
		entries[h.Name] = entry{h, data}
	}
}

// TestLayoutReadsBack: a layout written to disk is a valid OCI layout: its
// index points at a manifest, the manifest at a config and one layer, every
// blob hashes to its name with the size its descriptor gives, the config's
// diff_id is the uncompressed layer's digest, the config runs as a non-root
// user with the given entrypoint, ports and platform, and the layer holds
// the files (with parents, modes, owners and a fixed mtime) in path order.
func TestLayoutReadsBack(t *testing.T) {
	t.Parallel()
	b, err := ociimage.Build(tinyImage())
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, b.WriteLayout(dir))

	layoutFile, err := os.ReadFile(filepath.Join(dir, "oci-layout"))
	require.NoError(t, err)
	require.JSONEq(t, `{"imageLayoutVersion":"1.0.0"}`, string(layoutFile))

	indexJSON, err := os.ReadFile(filepath.Join(dir, "index.json"))
	require.NoError(t, err)
	var index ociimage.Index
	require.NoError(t, json.Unmarshal(indexJSON, &index))
	require.Equal(t, 2, index.SchemaVersion)
	require.Equal(t, ociimage.MediaTypeIndex, index.MediaType)
	require.Len(t, index.Manifests, 1)
	md := index.Manifests[0]
	require.Equal(t, ociimage.MediaTypeManifest, md.MediaType)
	require.Equal(t, b.Manifest.Digest, md.Digest)
	require.Equal(t, &ociimage.Platform{Architecture: "amd64", OS: "linux"}, md.Platform)
	require.Equal(t, "v0.0.1", md.Annotations[ociimage.AnnotationRefName])

	var m ociimage.Manifest
	require.NoError(t, json.Unmarshal(readBlob(t, dir, md), &m))
	require.Equal(t, 2, m.SchemaVersion)
	require.Equal(t, ociimage.MediaTypeManifest, m.MediaType)
	require.Equal(t, ociimage.MediaTypeConfig, m.Config.MediaType)
	require.Len(t, m.Layers, 1)
	require.Equal(t, ociimage.MediaTypeLayer, m.Layers[0].MediaType)

	var cfg ociimage.ConfigFile
	require.NoError(t, json.Unmarshal(readBlob(t, dir, m.Config), &cfg))
	require.Equal(t, "linux", cfg.OS)
	require.Equal(t, "amd64", cfg.Architecture)
	require.Equal(t, "65532:65532", cfg.Config.User)
	require.True(t, ociimage.NonRootUser(cfg.Config.User))
	require.Equal(t, []string{"/usr/local/bin/app"}, cfg.Config.Entrypoint)
	require.Contains(t, cfg.Config.ExposedPorts, "9090/tcp")
	require.Equal(t, "v0.0.1", cfg.Config.Labels["org.opencontainers.image.version"])
	require.True(t, cfg.Created.Equal(ociimage.Epoch))

	gz := readBlob(t, dir, m.Layers[0])
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	require.NoError(t, err)
	raw, err := io.ReadAll(zr)
	require.NoError(t, err)
	sum := sha256.Sum256(raw)
	require.Equal(t, []string{"sha256:" + hex.EncodeToString(sum[:])}, cfg.RootFS.DiffIDs, "diff_id is the uncompressed layer's digest")
	require.Equal(t, "layers", cfg.RootFS.Type)

	names, entries := untar(t, bytes.NewReader(raw))
	require.Equal(t, []string{
		"etc/", "etc/group", "etc/passwd", "etc/ssl/", "etc/ssl/certs/", "etc/ssl/certs/ca-certificates.crt",
		"home/", "home/nonroot/", "tmp/", "usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/app",
	}, names, "parents first, sorted by path")
	for _, n := range names {
		require.True(t, entries[n].hdr.ModTime.Equal(ociimage.Epoch), "%s has the fixed mtime", n)
	}
	app := entries["usr/local/bin/app"]
	require.Equal(t, "#!/bin/true\n", string(app.data))
	require.Equal(t, int64(0o755), app.hdr.Mode)
	require.Equal(t, byte(tar.TypeReg), app.hdr.Typeflag)
	require.Equal(t, int64(0o1777), entries["tmp/"].hdr.Mode)
	require.Equal(t, 65532, entries["home/nonroot/"].hdr.Uid)
	require.Equal(t, 0, entries["etc/passwd"].hdr.Uid)
	require.Contains(t, string(entries["etc/passwd"].data), "nonroot:x:65532:65532:")
	require.Contains(t, string(entries["etc/group"].data), "nonroot:x:65532:")
}

// TestReproducible: building the same image twice gives the same digests
// and byte-identical archives; a changed file changes the digest.
func TestReproducible(t *testing.T) {
	t.Parallel()
	a, err := ociimage.Build(tinyImage())
	require.NoError(t, err)
	b, err := ociimage.Build(tinyImage())
	require.NoError(t, err)
	require.Equal(t, a.Manifest.Digest, b.Manifest.Digest)
	var archA, archB bytes.Buffer
	require.NoError(t, a.WriteArchive(&archA))
	require.NoError(t, b.WriteArchive(&archB))
	require.Equal(t, archA.Bytes(), archB.Bytes())

	changed := tinyImage()
	changed.Files[0].Data = []byte("#!/bin/false\n")
	c, err := ociimage.Build(changed)
	require.NoError(t, err)
	require.NotEqual(t, a.Manifest.Digest, c.Manifest.Digest)
}

// TestArchiveHoldsTheLayout: the OCI archive is a tar of exactly the files
// WriteLayout writes, with the same content.
func TestArchiveHoldsTheLayout(t *testing.T) {
	t.Parallel()
	b, err := ociimage.Build(tinyImage())
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "sub", "img.oci.tar")
	require.NoError(t, b.WriteArchiveFile(p))
	f, err := os.Open(p)
	require.NoError(t, err)
	defer f.Close()
	_, entries := untar(t, f)

	dir := t.TempDir()
	require.NoError(t, b.WriteLayout(dir))
	files := 0
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		require.NoError(t, err)
		want, err := os.ReadFile(p)
		require.NoError(t, err)
		e, ok := entries[filepath.ToSlash(rel)]
		require.True(t, ok, "archive holds %s", rel)
		require.Equal(t, want, e.data, rel)
		files++
		return nil
	}))
	regular := 0
	for _, e := range entries {
		if e.hdr.Typeflag == tar.TypeReg {
			regular++
		}
	}
	require.Equal(t, files, regular)
	require.Equal(t, 5, files, "oci-layout, index.json and three blobs")
}

// TestBadInput: paths must be absolute and clean, unique, and not both a
// file and a directory; the architecture is required.
func TestBadInput(t *testing.T) {
	t.Parallel()
	for name, files := range map[string][]ociimage.File{
		"relative":       {{Path: "etc/passwd"}},
		"unclean":        {{Path: "/etc/../passwd"}},
		"root":           {{Path: "/"}},
		"twice":          {{Path: "/a"}, {Path: "/a"}},
		"file as parent": {{Path: "/a"}, {Path: "/a/b"}},
		"dir with data":  {{Path: "/a", Mode: os.ModeDir, Data: []byte("x")}},
		"symlink":        {{Path: "/a", Mode: os.ModeSymlink}},
	} {
		_, err := ociimage.Build(ociimage.Image{Architecture: "amd64", Files: files})
		require.Error(t, err, name)
	}
	_, err := ociimage.Build(ociimage.Image{})
	require.ErrorContains(t, err, "Architecture")
}

func TestNonRootUser(t *testing.T) {
	t.Parallel()
	for user, want := range map[string]bool{
		"": false, "0": false, "0:0": false, "root": false, "root:root": false, "00": false,
		"65532": true, "65532:65532": true, "nonroot": true, "1000:0": true,
	} {
		require.Equal(t, want, ociimage.NonRootUser(user), "%q", user)
	}
}
