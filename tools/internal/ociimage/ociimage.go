// Package ociimage writes a single-layer container image as an OCI image
// layout (oci-layout, index.json, blobs/sha256/...) or as an OCI archive (a
// tar of that layout, what `skopeo copy oci-archive:...` reads).
//
// It exists so the worker image can be built without a Docker daemon,
// without pulling a base image and without network access: the image is a
// static Go binary plus a handful of files (CA certificates, /etc/passwd and
// /etc/group naming an unprivileged user), so a base image would add
// nothing but size and a supply-chain dependency. Only the standard library
// is used.
//
// The output is deterministic: every tar entry has a fixed modification
// time, owner and order (parents first, then sorted by path), JSON is
// encoded with sorted keys, and gzip headers carry no name or time. The
// same inputs built with the same Go toolchain give the same manifest
// digest.
package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Media types of the OCI image specification (v1.1).
const (
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"

	// LayoutVersion is the imageLayoutVersion written to oci-layout.
	LayoutVersion = "1.0.0"

	// AnnotationRefName names a manifest in index.json: the tag skopeo and
	// other tools use for oci-archive:path:tag.
	AnnotationRefName = "org.opencontainers.image.ref.name"
)

// Epoch is the modification and creation time of everything in an image
// whose Image.Created is zero.
var Epoch = time.Unix(0, 0).UTC()

// File is one entry of the image's layer.
type File struct {
	// Path is absolute and clean, e.g. /usr/local/bin/app.
	Path string
	// Mode holds the permission bits, plus fs.ModeDir for a directory and
	// fs.ModeSticky for a sticky one (/tmp). Zero means 0o644 for a file
	// and 0o755 for a directory.
	Mode fs.FileMode
	// UID and GID own the entry; zero is root.
	UID, GID int
	// Data is a regular file's content; a directory has none.
	Data []byte
}

// Dir returns a directory entry.
func Dir(p string, mode fs.FileMode, uid, gid int) File {
	return File{Path: p, Mode: fs.ModeDir | mode.Perm() | mode&fs.ModeSticky, UID: uid, GID: gid}
}

// AccountFiles returns /etc/passwd and /etc/group with root and one
// unprivileged user (group of the same name), and its home directory, owned
// by it. Programs that look up the current user (and TLS libraries reading
// $HOME) then find one, while the image runs as uid rather than root.
func AccountFiles(name string, uid, gid int, home string) []File {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:%s:/sbin/nologin\n", name, uid, gid, name, home)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", name, gid)
	return []File{
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte(passwd)},
		{Path: "/etc/group", Mode: 0o644, Data: []byte(group)},
		Dir(home, 0o755, uid, gid),
	}
}

// Image describes the image to write.
type Image struct {
	// Files make up the single layer. Missing parent directories are added
	// (root-owned, 0o755).
	Files []File

	// OS and Architecture (GOOS/GOARCH spelling) are the platform; OS
	// defaults to linux. Variant is optional (v7 for arm, v8 for arm64).
	OS, Architecture, Variant string

	// The runtime configuration, as in the config's "config" object.
	User         string   // "uid:gid"; numeric, so runAsNonRoot can verify it
	Entrypoint   []string // absolute path first
	Cmd          []string
	Env          []string // KEY=value; never secrets, the config is public
	WorkingDir   string
	ExposedPorts []string // "9090/tcp"
	Labels       map[string]string

	// Created is the config's creation time and every entry's modification
	// time; zero means Epoch, for reproducible digests.
	Created time.Time
	// RefName, when set, annotates the manifest in index.json with
	// org.opencontainers.image.ref.name (a tag, e.g. "v1.2.3").
	RefName string
}

// Descriptor is an OCI content descriptor.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *Platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Platform is a descriptor's platform.
type Platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Variant      string `json:"variant,omitempty"`
}

// Manifest is an OCI image manifest.
type Manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Config        Descriptor        `json:"config"`
	Layers        []Descriptor      `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// Index is an OCI image index (index.json).
type Index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []Descriptor `json:"manifests"`
}

// ConfigFile is an OCI image configuration.
type ConfigFile struct {
	Created      time.Time `json:"created"`
	Architecture string    `json:"architecture"`
	OS           string    `json:"os"`
	Variant      string    `json:"variant,omitempty"`
	Config       Config    `json:"config"`
	RootFS       RootFS    `json:"rootfs"`
	History      []History `json:"history,omitempty"`
}

// Config is the runtime part of ConfigFile.
type Config struct {
	User         string              `json:"User,omitempty"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts,omitempty"`
	Env          []string            `json:"Env,omitempty"`
	Entrypoint   []string            `json:"Entrypoint,omitempty"`
	Cmd          []string            `json:"Cmd,omitempty"`
	WorkingDir   string              `json:"WorkingDir,omitempty"`
	Labels       map[string]string   `json:"Labels,omitempty"`
}

// RootFS lists the layers' uncompressed digests.
type RootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

// History is one step of ConfigFile.History.
type History struct {
	Created   time.Time `json:"created"`
	CreatedBy string    `json:"created_by,omitempty"`
}

// Built is an image encoded in memory: its blobs by digest and index.json.
type Built struct {
	// Manifest describes the manifest; its Digest is the image's digest.
	Manifest Descriptor
	// Config and Layer describe the config and the single layer blob.
	Config, Layer Descriptor
	// DiffID is the digest of the uncompressed layer tar.
	DiffID string
	// Index is index.json's content.
	Index []byte
	// Blobs maps "sha256:<hex>" to content.
	Blobs map[string][]byte
}

// Build encodes img.
func Build(img Image) (*Built, error) {
	if img.OS == "" {
		img.OS = "linux"
	}
	if img.Architecture == "" {
		return nil, errors.New("ociimage: Architecture is required")
	}
	created := img.Created
	if created.IsZero() {
		created = Epoch
	}
	created = created.UTC()

	rawLayer, err := layerTar(img.Files, created)
	if err != nil {
		return nil, err
	}
	layer, err := gzipped(rawLayer)
	if err != nil {
		return nil, err
	}
	b := &Built{Blobs: map[string][]byte{}, DiffID: digest(rawLayer)}
	b.Layer = b.add(MediaTypeLayer, layer)

	cfg := ConfigFile{
		Created:      created,
		Architecture: img.Architecture,
		OS:           img.OS,
		Variant:      img.Variant,
		Config: Config{
			User:       img.User,
			Env:        img.Env,
			Entrypoint: img.Entrypoint,
			Cmd:        img.Cmd,
			WorkingDir: img.WorkingDir,
			Labels:     img.Labels,
		},
		RootFS:  RootFS{Type: "layers", DiffIDs: []string{b.DiffID}},
		History: []History{{Created: created, CreatedBy: "pgsched internal/ociimage"}},
	}
	if len(img.ExposedPorts) > 0 {
		cfg.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range img.ExposedPorts {
			cfg.Config.ExposedPorts[p] = struct{}{}
		}
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	b.Config = b.add(MediaTypeConfig, cfgJSON)

	manifest, err := json.Marshal(Manifest{
		SchemaVersion: 2,
		MediaType:     MediaTypeManifest,
		Config:        b.Config,
		Layers:        []Descriptor{b.Layer},
	})
	if err != nil {
		return nil, err
	}
	b.Manifest = b.add(MediaTypeManifest, manifest)
	b.Manifest.Platform = &Platform{Architecture: img.Architecture, OS: img.OS, Variant: img.Variant}
	if img.RefName != "" {
		b.Manifest.Annotations = map[string]string{AnnotationRefName: img.RefName}
	}
	b.Index, err = json.Marshal(Index{SchemaVersion: 2, MediaType: MediaTypeIndex, Manifests: []Descriptor{b.Manifest}})
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (b *Built) add(mediaType string, data []byte) Descriptor {
	d := digest(data)
	b.Blobs[d] = data
	return Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(data))}
}

// layoutFiles lists the files of the image layout, sorted by path.
func (b *Built) layoutFiles() (names []string, content map[string][]byte) {
	content = map[string][]byte{
		"oci-layout": []byte(`{"imageLayoutVersion":"` + LayoutVersion + `"}`),
		"index.json": b.Index,
	}
	for d, data := range b.Blobs {
		content["blobs/sha256/"+strings.TrimPrefix(d, "sha256:")] = data
	}
	for n := range content {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, content
}

// WriteLayout writes the image layout into dir, creating it if needed.
// Blobs already there are overwritten, index.json replaced.
func (b *Built) WriteLayout(dir string) error {
	names, content := b.layoutFiles()
	for _, n := range names {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, content[n], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// WriteArchive writes the image layout as an uncompressed tar to w: an OCI
// archive, as `skopeo copy oci-archive:FILE docker://...` reads it.
func (b *Built) WriteArchive(w io.Writer) error {
	names, content := b.layoutFiles()
	tw := tar.NewWriter(w)
	mtime := Epoch
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: mtime}); err != nil {
			return err
		}
	}
	for _, n := range names {
		data := content[n]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: int64(len(data)), ModTime: mtime}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// WriteArchiveFile writes the OCI archive to path atomically (a temporary
// file renamed into place), creating its directory.
func (b *Built) WriteArchiveFile(p string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".ociimage-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := b.WriteArchive(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), p)
}

// layerTar returns the layer's uncompressed tar: files and their missing
// parent directories, sorted by path, each with mtime.
func layerTar(files []File, mtime time.Time) ([]byte, error) {
	entries := map[string]File{}
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return nil, fmt.Errorf("ociimage: file path %q is not absolute and clean", f.Path)
		}
		if _, dup := entries[f.Path]; dup {
			return nil, fmt.Errorf("ociimage: %s is given twice", f.Path)
		}
		if f.Mode.IsDir() && len(f.Data) > 0 {
			return nil, fmt.Errorf("ociimage: directory %s has data", f.Path)
		}
		entries[f.Path] = f
	}
	for p := range entries {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if e, ok := entries[d]; ok {
				if !e.Mode.IsDir() {
					return nil, fmt.Errorf("ociimage: %s is a file and a parent of %s", d, p)
				}
				continue
			}
			entries[d] = Dir(d, 0o755, 0, 0)
		}
	}
	paths := make([]string, 0, len(entries))
	for p := range entries {
		paths = append(paths, p)
	}
	// Sorting by path puts every directory before what it holds.
	slices.Sort(paths)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		f := entries[p]
		h := &tar.Header{
			Name:    strings.TrimPrefix(p, "/"),
			Uid:     f.UID,
			Gid:     f.GID,
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		mode := f.Mode
		if mode.IsDir() {
			h.Typeflag = tar.TypeDir
			h.Name += "/"
			if mode.Perm() == 0 {
				mode |= 0o755
			}
		} else {
			if !mode.IsRegular() {
				return nil, fmt.Errorf("ociimage: %s: only regular files and directories are supported", p)
			}
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.Data))
			if mode.Perm() == 0 {
				mode |= 0o644
			}
		}
		h.Mode = int64(mode.Perm())
		if mode&fs.ModeSticky != 0 {
			h.Mode |= 0o1000
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("ociimage: %s: %w", p, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func gzipped(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	// No Name and no ModTime in the header: the same input gives the same
	// bytes.
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// NonRootUser reports whether an image config's User runs as someone other
// than root: set, and neither "root" nor uid 0 (with or without a group).
// A name other than root is accepted, though only a numeric uid lets
// Kubernetes' runAsNonRoot check it.
func NonRootUser(user string) bool {
	u, _, _ := strings.Cut(user, ":")
	if u == "" || u == "root" {
		return false
	}
	if n, err := strconv.Atoi(u); err == nil && n == 0 {
		return false
	}
	return true
}
