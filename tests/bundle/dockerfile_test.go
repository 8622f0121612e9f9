package bundle

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// dockerfileLines returns the instructions of a Dockerfile, continuation lines joined.
func dockerfileLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	var cur strings.Builder
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	return lines
}

// TestDockerfileShape checks the image recipe: base images only from build arguments (no
// registry written in the repository), a static build, a non-root user and one file copied.
func TestDockerfileShape(t *testing.T) {
	lines := dockerfileLines(t, repo(t, "Dockerfile"))
	text := strings.Join(lines, "\n")
	for _, want := range []string{"ARG BUILDER_IMAGE", "ARG RUNTIME_IMAGE", "FROM ${BUILDER_IMAGE} AS builder", "FROM ${RUNTIME_IMAGE}",
		"USER 65532:65532", "COPY --from=builder /manager /manager", `ENTRYPOINT ["/manager"]`} {
		if !strings.Contains(text, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	for _, l := range lines {
		if (strings.HasPrefix(l, "ARG BUILDER_IMAGE") || strings.HasPrefix(l, "ARG RUNTIME_IMAGE")) && strings.Contains(l, "=") {
			t.Errorf("%q gives a default base image; base images come from the Makefile (no registry in the repository)", l)
		}
		if strings.HasPrefix(l, "COPY --from=") && !strings.HasSuffix(l, "/manager /manager") {
			t.Errorf("the runtime stage copies more than /manager: %q", l)
		}
	}
}

var envRef = regexp.MustCompile(`\$\{?([A-Z_]+)\}?`)

// TestDockerfileBuildSucceeds runs the Dockerfile's `go build` with its exact flags and
// environment (build arguments substituted) into a temporary directory, checks the binary
// reports the version linked in, and that .dockerignore keeps every file the build needs.
func TestDockerfileBuildSucceeds(t *testing.T) {
	var build string
	for _, l := range dockerfileLines(t, repo(t, "Dockerfile")) {
		if strings.HasPrefix(l, "RUN ") && strings.Contains(l, "go build") {
			build = strings.TrimPrefix(l, "RUN ")
		}
	}
	if build == "" {
		t.Fatal("the Dockerfile runs no go build")
	}
	out := filepath.Join(t.TempDir(), "manager")
	args := map[string]string{"VERSION": "v0.0.0-dockerfile-test", "TARGETOS": runtime.GOOS, "TARGETARCH": runtime.GOARCH}
	fields := splitShell(envRef.ReplaceAllStringFunc(build, func(m string) string { return args[envRef.FindStringSubmatch(m)[1]] }))
	var env []string
	for len(fields) > 0 && strings.Contains(fields[0], "=") {
		env = append(env, fields[0])
		fields = fields[1:]
	}
	if !contains(env, "CGO_ENABLED=0") {
		t.Errorf("the Dockerfile build is not static (CGO_ENABLED=0): %v", env)
	}
	if len(fields) < 2 || fields[0] != "go" || fields[1] != "build" {
		t.Fatalf("unexpected build command %q", build)
	}
	for i, f := range fields {
		if f == "-o" && i+1 < len(fields) {
			if fields[i+1] != "/manager" {
				t.Errorf("the build writes %s, the runtime stage copies /manager", fields[i+1])
			}
			fields[i+1] = out
		}
	}
	cmd := exec.Command("go", fields[1:]...)
	cmd.Dir = repo(t)
	cmd.Env = append(os.Environ(), env...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the Dockerfile's build fails (is main.go complete and go.mod tidy?): %v\n%s", err, msg)
	}
	version, err := exec.Command(out, "--version").Output()
	if err != nil || strings.TrimSpace(string(version)) != args["VERSION"] {
		t.Errorf("the built operator reports version %q (%v), want %q from -X main.version", version, err, args["VERSION"])
	}
	checkDockerignoreKeepsBuildInputs(t, env)
}

// checkDockerignoreKeepsBuildInputs fails when .dockerignore excludes a file of a package the
// operator binary is built from.
func checkDockerignoreKeepsBuildInputs(t *testing.T, env []string) {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", `{{if not .Standard}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}
{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}
{{end}}{{end}}`, ".")
	cmd.Dir = repo(t)
	cmd.Env = append(os.Environ(), env...)
	listed, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	ignore := dockerignore(t)
	root := repo(t) + string(filepath.Separator)
	for _, f := range strings.Fields(string(listed)) {
		rel, ok := strings.CutPrefix(f, root)
		if !ok {
			continue // a module dependency, downloaded by go mod download
		}
		for _, re := range ignore {
			if re.MatchString(filepath.ToSlash(rel)) {
				t.Errorf(".dockerignore excludes %s, which the operator build needs (pattern %s)", rel, re)
			}
		}
	}
}

// dockerignore turns .dockerignore patterns into path regexps (** any depth, * one segment;
// a pattern also excludes everything below a matching directory).
func dockerignore(t *testing.T) []*regexp.Regexp {
	t.Helper()
	var res []*regexp.Regexp
	for _, line := range strings.Split(string(read(t, repo(t, ".dockerignore"))), "\n") {
		p := strings.TrimSuffix(strings.TrimSpace(line), "/")
		if p == "" || strings.HasPrefix(p, "#") || strings.HasPrefix(p, "!") {
			continue
		}
		q := regexp.QuoteMeta(p)
		q = strings.ReplaceAll(q, `\*\*/`, `(.*/)?`)
		q = strings.ReplaceAll(q, `\*`, `[^/]*`)
		res = append(res, regexp.MustCompile(`^`+q+`(/.*)?$`))
	}
	return res
}

// splitShell splits a command line on blanks, honouring double quotes.
func splitShell(s string) []string {
	var out []string
	var cur strings.Builder
	quoted, started := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, started = !quoted, true
		case (r == ' ' || r == '\t') && !quoted:
			if started {
				out = append(out, cur.String())
				cur.Reset()
				started = false
			}
		default:
			cur.WriteRune(r)
			started = true
		}
	}
	if started {
		out = append(out, cur.String())
	}
	return out
}
