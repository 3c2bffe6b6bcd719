// Package packaging_test checks the files that install dmarcd: the systemd
// unit (packaging/dmarcd.service) and the Dockerfile at the repository
// root. There is no Docker daemon in CI, so the Dockerfile is parsed and
// its binary stage's build command run as written.
package packaging_test

import (
	"bufio"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// buildDmarcd builds the binary once per test into a temporary folder.
func buildDmarcd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dmarcd")
	cmd := exec.Command("go", "build", "-o", bin, "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// serveFlags are the flags 'dmarcd serve' takes, read from its help.
func serveFlags(t *testing.T, bin string) map[string]bool {
	t.Helper()
	out, err := exec.Command(bin, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("serve --help: %v\n%s", err, out)
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`--([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	return flags
}

// checkEnvNamesFlags fails for a DMARCD_ variable that names no flag.
func checkEnvNamesFlags(t *testing.T, text string, flags map[string]bool) {
	t.Helper()
	for _, m := range regexp.MustCompile(`DMARCD_([A-Z0-9_]+)=`).FindAllStringSubmatch(text, -1) {
		flag := strings.ToLower(strings.ReplaceAll(m[1], "_", "-"))
		if !flags[flag] {
			t.Errorf("DMARCD_%s names no flag of dmarcd serve (--%s)", m[1], flag)
		}
	}
}

// TestSystemdUnit ensures the unit has its own user, a state directory and
// the hardening the README promises, that every DMARCD_ variable it sets
// is a flag, and that systemd-analyze verify accepts it (where installed).
func TestSystemdUnit(t *testing.T) {
	raw, err := os.ReadFile("dmarcd.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(raw)
	for _, want := range []string{"\nUser=dmarcd\n", "\nStateDirectory=dmarcd\n", "\nProtectSystem=strict\n", "\nNoNewPrivileges=yes\n",
		"\nAmbientCapabilities=CAP_NET_BIND_SERVICE\n", "\nExecStart=/usr/local/bin/dmarcd serve\n", "\nExecReload=/bin/kill -HUP $MAINPID\n",
		"\nWantedBy=multi-user.target\n", "DMARCD_DATA_DIR=/var/lib/dmarcd"} {
		if !strings.Contains(unit, want) {
			t.Errorf("dmarcd.service lacks %q", strings.TrimSpace(want))
		}
	}
	bin := buildDmarcd(t)
	checkEnvNamesFlags(t, unit, serveFlags(t, bin))

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the unit was checked for its directives only")
	}
	// verify checks that ExecStart's program exists: point it at the
	// binary just built.
	path := filepath.Join(t.TempDir(), "dmarcd.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(unit, "ExecStart=/usr/local/bin/dmarcd", "ExecStart="+bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	if len(out) > 0 {
		t.Logf("systemd-analyze verify said:\n%s", out)
	}
}

// stage is one stage of the parsed Dockerfile: its instructions.
type stage struct {
	from, name string
	lines      []string // instructions, continuation lines joined
}

func parseDockerfile(t *testing.T, path string) []stage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stages []stage
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		inst := strings.Join(strings.Fields(cur.String()), " ")
		cur.Reset()
		word, rest, _ := strings.Cut(inst, " ")
		switch strings.ToUpper(word) {
		case "FROM":
			f := strings.Fields(rest)
			s := stage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			stages = append(stages, s)
		case "RUN", "COPY", "ENV", "USER", "VOLUME", "EXPOSE", "HEALTHCHECK", "ENTRYPOINT", "CMD", "WORKDIR", "ARG", "LABEL":
			if len(stages) == 0 {
				if strings.ToUpper(word) == "ARG" {
					continue
				}
				t.Fatalf("%s before FROM", word)
			}
			stages[len(stages)-1].lines = append(stages[len(stages)-1].lines, strings.ToUpper(word)+" "+rest)
		default:
			t.Fatalf("unknown Dockerfile instruction %q", word)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}

func (s stage) find(prefix string) []string {
	var out []string
	for _, l := range s.lines {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// TestDockerfile ensures the image is multi-stage, runs as a non-root
// user, keeps data and geolocation databases in volumes, checks /readyz,
// and that its binary stage's build command, run as written, makes a
// static binary carrying the version given.
func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t, filepath.Join("..", "Dockerfile"))
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a build stage and a runtime stage", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]
	if build.name == "" {
		t.Error("the build stage has no name")
	}
	if !strings.Contains(strings.Join(final.find("COPY"), "\n"), "--from="+build.name) {
		t.Error("the runtime stage copies nothing from the build stage")
	}
	users := final.find("USER ")
	if len(users) == 0 {
		t.Error("the runtime stage runs as root: no USER")
	} else if u := strings.TrimPrefix(users[len(users)-1], "USER "); u == "root" || u == "0" || strings.HasPrefix(u, "0:") {
		t.Errorf("the runtime stage runs as %s", u)
	}
	vols := strings.Join(final.find("VOLUME"), " ")
	for _, v := range []string{`"/data"`, `"/geoip"`} {
		if !strings.Contains(vols, v) {
			t.Errorf("no VOLUME %s", v)
		}
	}
	if hc := final.find("HEALTHCHECK"); len(hc) != 1 || !strings.Contains(hc[0], "/readyz") {
		t.Errorf("HEALTHCHECK on /readyz missing: %v", hc)
	}
	if len(final.find("ENTRYPOINT")) != 1 {
		t.Error("no ENTRYPOINT")
	}

	// The build command, as written.
	var buildCmd string
	for _, l := range build.find("RUN ") {
		if strings.Contains(l, "go build") {
			buildCmd = strings.TrimPrefix(l, "RUN ")
		}
	}
	if !strings.Contains(buildCmd, "CGO_ENABLED=0") || !strings.Contains(buildCmd, "-o /out/dmarcd") {
		t.Fatalf("the build stage's go build is not static into /out/dmarcd: %q", buildCmd)
	}
	bin := filepath.Join(t.TempDir(), "dmarcd")
	cmd := exec.Command("sh", "-c", strings.Replace(buildCmd, "-o /out/dmarcd", "-o "+bin, 1))
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "VERSION=v9.9.9-test")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", buildCmd, err, out)
	}
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary is dynamically linked (it has an interpreter)")
		}
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "v9.9.9-test") {
		t.Errorf("version of the image's binary: %v\n%s", err, out)
	}
	raw, _ := os.ReadFile(filepath.Join("..", "Dockerfile"))
	checkEnvNamesFlags(t, string(raw), serveFlags(t, bin))
	ignore, _ := os.ReadFile(filepath.Join("..", ".dockerignore"))
	for _, l := range strings.Split(string(ignore), "\n") {
		if l = strings.TrimSpace(l); l == "go.mod" || l == "go.sum" || l == "*.go" || l == "httpapi" {
			t.Errorf(".dockerignore leaves %s out of the build", l)
		}
	}
}

// readmeBlock returns the first fenced block of README.md's "## Install"
// section that follows the paragraph starting with lead.
func readmeBlock(t *testing.T, lead string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	i := strings.Index(s, "\n## Install\n")
	if i < 0 {
		t.Fatal("README.md has no Install section")
	}
	s = s[i:]
	j := strings.Index(s, lead)
	if j < 0 {
		t.Fatalf("README.md's Install section has no %q", lead)
	}
	m := regexp.MustCompile("(?s)\n```[a-z]*\n(.*?)\n```").FindStringSubmatch(s[j:])
	if m == nil {
		t.Fatalf("no code block after %q", lead)
	}
	return m[1]
}

// commands joins continuation lines and drops comments, "sudo " and
// spacing, so that commands compare by what they run.
func commands(text string) []string {
	text = regexp.MustCompile(`\\\n\s*`).ReplaceAllString(text, " ")
	var out []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#"))
		if c, _, ok := strings.Cut(l, "   #"); ok {
			l = c
		}
		l = strings.Join(strings.Fields(strings.ReplaceAll(l, "sudo ", "")), " ")
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// exampleLines returns the commands a file's comments show, the lines
// indented under "#   ".
func exampleLines(text string) string {
	var b strings.Builder
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "#   ") {
			b.WriteString(strings.TrimPrefix(l, "#") + "\n")
		}
	}
	return b.String()
}

// TestInstallFilesAgreeWithReadme ensures the install files say what the
// README says (issue 24 item 20): the Dockerfile's example commands are
// the README's, and publish the API on the host's loopback only (the
// image listens on 0.0.0.0 inside the container, which is why -p needs
// 127.0.0.1); the systemd unit's install and key commands are the
// README's, with the same paths; serve --help's example keeps the API on
// loopback too.
func TestInstallFilesAgreeWithReadme(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	docker := commands(exampleLines(string(raw)))
	readme := strings.Join(commands(readmeBlock(t, "**Docker.**")), "\n")
	if len(docker) < 3 {
		t.Fatalf("the Dockerfile's comment has %d example commands", len(docker))
	}
	for _, c := range docker {
		if !strings.Contains(readme, c) {
			t.Errorf("the Dockerfile's example %q is not the README's:\n%s", c, readme)
		}
		if strings.HasPrefix(c, "docker run") && (!strings.Contains(c, "-p 127.0.0.1:8080:8080") || strings.Contains(c, " -p 8080")) {
			t.Errorf("docker run publishes the API beyond the host's loopback: %s", c)
		}
	}

	unit, err := os.ReadFile("dmarcd.service")
	if err != nil {
		t.Fatal(err)
	}
	systemdBlock := readmeBlock(t, "**systemd.**")
	systemd := strings.Join(commands(systemdBlock), "\n")
	cmds := commands(exampleLines(string(unit)))
	if len(cmds) < 5 {
		t.Fatalf("the unit's comment has %d commands", len(cmds))
	}
	for _, c := range cmds {
		if !strings.Contains(systemd, c) {
			t.Errorf("the unit's command %q is not in the README's systemd block:\n%s", c, systemd)
		}
	}
	// sudo's secure_path often lacks /usr/local/bin: the CLI as the
	// service's user is called by the path ExecStart runs.
	for _, text := range []string{string(unit), systemdBlock} {
		if m := regexp.MustCompile(`sudo -u dmarcd (\S+) --data-dir`).FindStringSubmatch(text); m == nil || m[1] != "/usr/local/bin/dmarcd" {
			t.Errorf("the CLI as the service's user is not called by its full path: %v", m)
		}
	}

	bin := buildDmarcd(t)
	out, err := exec.Command(bin, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	if help := string(out); strings.Contains(help, "--listen 0.0.0.0") || !strings.Contains(help, "--listen 127.0.0.1:8080") {
		t.Errorf("serve --help's example does not keep the API on loopback:\n%s", help)
	}
}
