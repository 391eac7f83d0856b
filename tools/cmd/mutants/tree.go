package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// trackedFiles lists the working tree's files as git sees them: tracked
// ones (as they are on disk, edits included) and untracked ones not
// ignored, so a mutation run tests what is about to be committed.
func trackedFiles(ctx context.Context, root string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files in %s: %w: %s", root, err, strings.TrimSpace(stderr.String()))
	}
	seen := map[string]bool{}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" && !seen[f] {
			seen[f] = true
			files = append(files, f)
		}
	}
	return files, nil
}

// copyTree copies files (relative to root) into dst, keeping their modes
// and symbolic links. Files git knows but the disk does not (deleted, not
// yet staged) are left out.
func copyTree(root, dst string, files []string) error {
	for _, f := range files {
		src := filepath.Join(root, filepath.FromSlash(f))
		to := filepath.Join(dst, filepath.FromSlash(f))
		fi, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(src)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, to); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			if err := copyFile(src, to, fi.Mode().Perm()); err != nil {
				return err
			}
		}
		// Anything else (a submodule's directory) is not source to mutate.
	}
	return nil
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return fmt.Errorf("copying %s: %w", src, err)
	}
	return out.Close()
}

// errNotApplied marks a mutation whose old text is not in its file
// exactly once: the code moved on and the list must follow.
var errNotApplied = errors.New("not applied")

// apply makes m's edits in the copy at dir and returns a function that
// puts the files back as they were. On error nothing stays changed.
func apply(dir string, m mutation) (restore func() error, err error) {
	orig := map[string][]byte{} // first content of each file touched
	var order []string
	restore = func() error {
		var errs []error
		for _, f := range order {
			if err := os.WriteFile(filepath.Join(dir, f), orig[f], 0o644); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	for _, e := range m.Edits {
		path := filepath.Join(dir, filepath.FromSlash(e.File))
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("%w: %s: %v", errNotApplied, e.File, err), restore())
		}
		if _, ok := orig[e.File]; !ok {
			orig[e.File] = data
			order = append(order, e.File)
		}
		if n := bytes.Count(data, []byte(e.Old)); n != 1 {
			return nil, errors.Join(fmt.Errorf("%w: %s has the old text %d times, not once: %q",
				errNotApplied, e.File, n, abbreviate(e.Old)), restore())
		}
		mutated := bytes.Replace(data, []byte(e.Old), []byte(e.New), 1)
		if err := os.WriteFile(path, mutated, 0o644); err != nil {
			return nil, errors.Join(err, restore())
		}
	}
	return restore, nil
}

// checkApplies reports, for each mutation, whether its old texts occur
// exactly once in the files under root, without changing anything.
func checkApplies(root string, m mutation) error {
	files := map[string][]byte{}
	for _, e := range m.Edits {
		data, ok := files[e.File]
		if !ok {
			var err error
			if data, err = os.ReadFile(filepath.Join(root, filepath.FromSlash(e.File))); err != nil {
				return fmt.Errorf("%w: %v", errNotApplied, err)
			}
		}
		if n := bytes.Count(data, []byte(e.Old)); n != 1 {
			return fmt.Errorf("%w: %s has the old text %d times, not once: %q", errNotApplied, e.File, n, abbreviate(e.Old))
		}
		files[e.File] = bytes.Replace(data, []byte(e.Old), []byte(e.New), 1)
	}
	return nil
}

// abbreviate shortens s for a message.
func abbreviate(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
