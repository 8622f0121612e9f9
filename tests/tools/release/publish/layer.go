package publish

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// file is one entry of an image layer: a directory when Dir is set, else a regular file.
type file struct {
	// Path is the absolute path in the image (/etc/passwd).
	Path     string
	Mode     int64
	UID, GID int
	Dir      bool
	Body     []byte
}

// layerOf writes files as one gzip-compressed OCI layer. Every entry gets the same modification
// time and owner fields, and the entries are sorted by path with each parent directory first,
// so the same files always give the same digest.
func layerOf(files []file, mtime time.Time) (v1.Layer, error) {
	byPath := map[string]file{}
	for _, f := range files {
		p := path.Clean("/" + f.Path)
		if p == "/" {
			continue
		}
		f.Path = p
		byPath[p] = f
		// Parent directories the caller did not list: root-owned, 0755.
		for dir := path.Dir(p); dir != "/"; dir = path.Dir(dir) {
			if _, ok := byPath[dir]; !ok {
				byPath[dir] = file{Path: dir, Dir: true, Mode: 0o755}
			}
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		f := byPath[p]
		h := &tar.Header{
			Name:    strings.TrimPrefix(p, "/"),
			Mode:    f.Mode,
			Uid:     f.UID,
			Gid:     f.GID,
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		if f.Dir {
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.Body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if !f.Dir {
			if _, err := tw.Write(f.Body); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// treeFiles returns the files under dir as image files below prefix (dir/a/b -> prefix/a/b):
// directories 0755, files 0644, owned by root. Only regular files and directories are allowed.
func treeFiles(dir, prefix string) ([]file, error) {
	var out []file
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		target := path.Join(prefix, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			out = append(out, file{Path: target, Dir: true, Mode: 0o755})
		case d.Type().IsRegular():
			body, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out = append(out, file{Path: target, Mode: 0o644, Body: body})
		default:
			return fmt.Errorf("%s is neither a regular file nor a directory", p)
		}
		return nil
	})
	return out, err
}
