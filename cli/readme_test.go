package cli

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/dmarcd/dmarcd/webhook"
)

// The README's shell blocks are tested: the two-minute tour is run as
// written by e2e.TestReadmeTour; every other ```sh block (and every "$ "
// line of a ```console block) of README.md and docs/*.md is checked here.
// A block whose commands cannot run on a test machine (systemctl, docker,
// a real mailbox) still has each of its commands checked against what it
// names: a dmarcd command line must parse with the real command tree
// (command, flags, their values, the arguments), a curl must name a method
// and path of httpapi/openapi.json, a go command existing packages and fuzz
// targets, a bench/run.sh target one the script has. The openssl one-liner
// of the webhook guide is run and must print webhook.Sign's signature.
// Any other program must be one this test knows, so a new block cannot
// slip through unchecked.

// docBlock is one shell block of a Markdown file.
type docBlock struct {
	file, section string
	line          int    // of the opening fence
	lang          string // "sh" or "console"
	text          string
}

// docBlocks returns the sh and console blocks of a Markdown file.
func docBlocks(t *testing.T, path string) []docBlock {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var (
		blocks  []docBlock
		section string
		cur     *docBlock
		fenced  bool // inside any fence, tested or not
	)
	for i, line := range strings.Split(string(raw), "\n") {
		trim := strings.TrimSpace(line)
		switch {
		case cur != nil && trim == "```":
			blocks = append(blocks, *cur)
			cur, fenced = nil, false
		case cur != nil:
			cur.text += line + "\n"
		case fenced && trim == "```":
			fenced = false
		case fenced:
		case trim == "```sh" || trim == "```console":
			cur = &docBlock{file: filepath.Base(path), section: section, line: i + 1, lang: strings.TrimPrefix(trim, "```")}
		case strings.HasPrefix(trim, "```"):
			fenced = true
		case strings.HasPrefix(line, "## "):
			section = strings.TrimPrefix(line, "## ")
		}
	}
	if cur != nil || fenced {
		t.Fatalf("%s: a code block is never closed", path)
	}
	return blocks
}

// shellCommands splits a block of shell into simple commands, each a list
// of words with quotes removed. It knows what the documentation uses:
// quotes (also across lines), backslash-newline, comments, $(...) and
// ${...} kept inside their word, the separators ; & && || | and newline,
// redirections (dropped with their target), and { } groups (dropped).
// It fails on a quote or $( left open.
func shellCommands(src string) ([][]string, error) {
	var (
		cmds  [][]string
		words []string
		word  strings.Builder
		inW   bool
	)
	dropNext := false // the next word is a redirection's target
	endWord := func() {
		if inW {
			if !dropNext {
				words = append(words, word.String())
			}
			word.Reset()
			inW, dropNext = false, false
		}
	}
	endCmd := func() {
		endWord()
		var kept []string
		for _, w := range words {
			if w != "{" && w != "}" {
				kept = append(kept, w)
			}
		}
		if len(kept) > 0 {
			cmds = append(cmds, kept)
		}
		words, dropNext = nil, false
	}
	rs := []rune(src)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case c == '\\' && i+1 < len(rs) && rs[i+1] == '\n':
			i++
			endWord()
		case c == '\\' && i+1 < len(rs):
			word.WriteRune(rs[i+1])
			inW = true
			i++
		case c == '\'':
			j := i + 1
			for j < len(rs) && rs[j] != '\'' {
				j++
			}
			if j == len(rs) {
				return nil, fmt.Errorf("a ' is never closed")
			}
			word.WriteString(string(rs[i+1 : j]))
			inW, i = true, j
		case c == '"':
			j := i + 1
			for j < len(rs) && rs[j] != '"' {
				if rs[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(rs) {
				return nil, fmt.Errorf(`a " is never closed`)
			}
			word.WriteString(string(rs[i+1 : j]))
			inW, i = true, j
		case c == '$' && i+1 < len(rs) && (rs[i+1] == '(' || rs[i+1] == '{'):
			open, closing := rs[i+1], map[rune]rune{'(': ')', '{': '}'}[rs[i+1]]
			depth, j := 0, i+1
			for ; j < len(rs); j++ {
				if rs[j] == open {
					depth++
				} else if rs[j] == closing {
					if depth--; depth == 0 {
						break
					}
				}
			}
			if j == len(rs) {
				return nil, fmt.Errorf("a $%c is never closed", open)
			}
			word.WriteString(string(rs[i : j+1]))
			inW, i = true, j
		case c == '#' && !inW:
			for i < len(rs) && rs[i] != '\n' {
				i++
			}
			endCmd()
		case c == '\n' || c == ';':
			endCmd()
		case c == '<' || c == '>':
			// A redirection, as bash reads it anywhere in a word: a file
			// descriptor before it is dropped, and so is its target.
			if inW && regexp.MustCompile(`^[0-9]+$`).MatchString(word.String()) {
				word.Reset()
				inW = false
			}
			endWord()
			if i+1 < len(rs) && rs[i+1] == c {
				i++
			}
			if i+1 < len(rs) && rs[i+1] == '&' {
				for i++; i+1 < len(rs) && rs[i+1] >= '0' && rs[i+1] <= '9'; i++ {
				}
				continue
			}
			dropNext = true
		case c == '|' || c == '&':
			if i+1 < len(rs) && rs[i+1] == c {
				i++
			}
			endCmd()
		case c == ' ' || c == '\t':
			endWord()
		default:
			word.WriteRune(c)
			inW = true
		}
	}
	endCmd()
	return cmds, nil
}

// TestShellCommands pins the splitter the README test relies on.
func TestShellCommands(t *testing.T) {
	got, err := shellCommands("A=1 sudo -u x dmarcd a 'b c' \\\n  --d \"e f\" > out.json 2>&1 # note\n" +
		"{ printf '%s.' \"$T\"; cat b; } | openssl dgst -hmac \"$W\" && x $(date +%F).db &\ncurl -d '{\n \"a\": 1}'")
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"A=1", "sudo", "-u", "x", "dmarcd", "a", "b c", "--d", "e f"},
		{"printf", "%s.", "$T"}, {"cat", "b"}, {"openssl", "dgst", "-hmac", "$W"},
		{"x", "$(date +%F).db"},
		{"curl", "-d", "{\n \"a\": 1}"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	got, err = shellCommands("curl http://h/a/<id>/b\ndmarcd keys revoke <key-id>")
	if err != nil {
		t.Fatal(err)
	}
	if want := "[[curl http://h/a/] [dmarcd keys revoke]]"; fmt.Sprint(got) != want {
		t.Errorf("placeholders in angle brackets are redirections: got %q, want %s", got, want)
	}
	if _, err := shellCommands("echo 'open"); err == nil {
		t.Error("an open quote was not refused")
	}
}

// program returns the program a command runs and its arguments, past
// variable assignments, sudo (with -u USER) and docker exec CONTAINER.
func program(words []string) (string, []string, map[string]string) {
	env := map[string]string{}
	for len(words) > 0 {
		w := words[0]
		switch {
		case regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(w):
			k, v, _ := strings.Cut(w, "=")
			env[k] = v
			words = words[1:]
		case w == "sudo":
			words = words[1:]
			if len(words) > 1 && words[0] == "-u" {
				words = words[2:]
			}
		case w == "docker" && len(words) > 2 && words[1] == "exec":
			words = words[3:]
		default:
			return w, words[1:], env
		}
	}
	return "", nil, env
}

// otherPrograms are the programs the documentation may run besides dmarcd,
// curl, go, bench/run.sh and openssl, which are checked.
var otherPrograms = map[string]bool{
	"useradd": true, "install": true, "systemctl": true, "docker": true, "cat": true, "rm": true,
	"geoipupdate": true, "kill": true, "sed": true, "grep": true, "printf": true, "export": true,
	"bench/out/bin/ingestbench": true, "bench/out/bin/importbench": true,
}

func TestReadmeShellBlocks(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join("..", "README.md")}, files...)
	api := openAPIRoutes(t)
	var checked, dmarcdLines, curlLines, ran int
	for _, f := range files {
		for _, b := range docBlocks(t, f) {
			where := fmt.Sprintf("%s:%d (%s)", b.file, b.line, b.section)
			if b.file == "README.md" && b.section == "Two-minute tour" {
				continue // run as written by e2e.TestReadmeTour
			}
			text := b.text
			if b.lang == "console" {
				var cmds []string
				for _, l := range strings.Split(text, "\n") {
					if c, ok := strings.CutPrefix(l, "$ "); ok {
						cmds = append(cmds, c)
					}
				}
				text = strings.Join(cmds, "\n")
			}
			if strings.Contains(text, "openssl dgst") {
				runSignatureOneLiner(t, where, text)
				ran++
				continue
			}
			cmds, err := shellCommands(text)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			checked++
			for _, words := range cmds {
				prog, args, env := program(words)
				line := strings.Join(words, " ")
				switch {
				case prog == "dmarcd" || prog == "./dmarcd" || prog == "/usr/local/bin/dmarcd": // the last as the systemd unit installs it
					dmarcdLines++
					if err := checkDmarcdLine(t, args, env); err != nil {
						t.Errorf("%s: %s: %v", where, line, err)
					}
				case prog == "curl":
					curlLines++
					if err := checkCurl(args, api); err != nil {
						t.Errorf("%s: %s: %v", where, line, err)
					}
				case prog == "go" && len(args) > 1 && args[0] == "run" && args[1] == ".":
					dmarcdLines++
					if err := checkDmarcdLine(t, args[2:], env); err != nil {
						t.Errorf("%s: %s: %v", where, line, err)
					}
				case prog == "go":
					if err := checkGo(args); err != nil {
						t.Errorf("%s: %s: %v", where, line, err)
					}
				case prog == "bench/run.sh":
					if err := checkBenchTarget(args); err != nil {
						t.Errorf("%s: %s: %v", where, line, err)
					}
				case otherPrograms[prog]:
				default:
					t.Errorf("%s: %s: the README test does not know %q: check it in cli/readme_test.go", where, line, prog)
				}
			}
		}
	}
	// Guard the guard: the README has blocks of each kind.
	if checked < 10 || dmarcdLines < 30 || curlLines < 8 || ran != 1 {
		t.Errorf("checked %d blocks, %d dmarcd lines, %d curls, ran %d one-liners: the README lost its blocks or the test its way to find them",
			checked, dmarcdLines, curlLines, ran)
	}
}

// checkDmarcdLine parses args as the dmarcd command line would: the
// command must exist and be runnable, the flags must be its own (or
// inherited) with values of their type, the arguments what the command
// takes, and its required flags given (on the line or in env).
func checkDmarcdLine(t *testing.T, args []string, env map[string]string) error {
	t.Helper()
	root := newRootCommand(&globalOptions{})
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if cmd.HasSubCommands() {
		// typeUsageErrors makes a group runnable, to refuse what follows.
		return fmt.Errorf("%q needs one of its commands (%s), not %q", cmd.CommandPath(), subcommandNames(cmd), rest)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return err
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		return err
	}
	for k := range env {
		if !strings.HasPrefix(k, "DMARCD_") {
			continue
		}
		if f := cmd.Flags().Lookup(strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k, "DMARCD_"), "_", "-"))); f == nil {
			return fmt.Errorf("%s names no flag of %s", k, cmd.CommandPath())
		}
	}
	var missing []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if len(f.Annotations[requiredAnnotation]) > 0 && !f.Changed && env[envName(f.Name)] == "" {
			missing = append(missing, "--"+f.Name)
		}
	})
	if len(missing) > 0 {
		return fmt.Errorf("required flags %s are neither given nor in the environment", strings.Join(missing, ", "))
	}
	return nil
}

// openAPIRoute is a path template of the OpenAPI document and its methods.
type openAPIRoute struct {
	segments []string
	methods  map[string]bool
}

func openAPIRoutes(t *testing.T) []openAPIRoute {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "httpapi", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var routes []openAPIRoute
	for p, ops := range doc.Paths {
		r := openAPIRoute{segments: strings.Split(strings.Trim(p, "/"), "/"), methods: map[string]bool{}}
		for m := range ops {
			r.methods[strings.ToUpper(m)] = true
		}
		routes = append(routes, r)
	}
	if len(routes) < 20 {
		t.Fatalf("openapi.json lists %d paths", len(routes))
	}
	return routes
}

// findRoute reports whether method and path (a placeholder such as <id>,
// ALERT_ID or {id} matching a path parameter) name a documented route.
func findRoute(routes []openAPIRoute, method, path string) error {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	placeholder := regexp.MustCompile(`^(<[a-z-]+>|[A-Z][A-Z_]*ID|\{[a-z_]+\})$`)
	for _, r := range routes {
		if len(r.segments) != len(segs) {
			continue
		}
		match := true
		for i, s := range r.segments {
			param := strings.HasPrefix(s, "{")
			if param && !placeholder.MatchString(segs[i]) || !param && s != segs[i] {
				match = false
				break
			}
		}
		if match {
			if !r.methods[method] {
				return fmt.Errorf("%s %s: the OpenAPI document has no %s for this path", method, path, method)
			}
			return nil
		}
	}
	return fmt.Errorf("%s %s: no such path in httpapi/openapi.json", method, path)
}

// checkCurl checks a curl against dmarcd's own address: the method (-X,
// else POST with -d, else GET) and path must be a documented route.
func checkCurl(args []string, routes []openAPIRoute) error {
	method, target := "", ""
	data := false
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-X" || a == "--request":
			i++
			if i < len(args) {
				method = args[i]
			}
		case a == "-d" || strings.HasPrefix(a, "--data"):
			data = true
			i++
		case a == "-H" || a == "--header" || a == "-o" || a == "-w":
			i++
		case strings.HasPrefix(a, "http://") || strings.HasPrefix(a, "https://"):
			target = a
		case strings.HasPrefix(a, "-"):
		default:
			return fmt.Errorf("curl argument %q is neither a known option nor a URL", a)
		}
	}
	if target == "" {
		return fmt.Errorf("curl names no URL")
	}
	u, err := url.Parse(target)
	if err != nil {
		return err
	}
	if u.Host != "127.0.0.1:8080" {
		return nil // another server (a webhook receiver, say)
	}
	if method == "" {
		method = "GET"
		if data {
			method = "POST"
		}
	}
	return findRoute(routes, method, u.Path)
}

// checkGo checks that the packages and paths a go command names exist, and
// a fuzz target is a function of that package's tests.
func checkGo(args []string) error {
	var fuzz string
	for i, a := range args {
		if a == "-fuzz" && i+1 < len(args) {
			fuzz = args[i+1]
		}
		if !strings.HasPrefix(a, "./") {
			continue
		}
		dir := filepath.Join("..", strings.TrimSuffix(strings.TrimSuffix(a, "..."), "/"))
		if _, err := os.Stat(dir); err != nil {
			return fmt.Errorf("%s does not exist", a)
		}
		if fuzz == "" {
			continue
		}
		tests, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
		found := false
		for _, f := range tests {
			src, _ := os.ReadFile(f)
			found = found || strings.Contains(string(src), "func "+fuzz+"(f *testing.F)")
		}
		if !found {
			return fmt.Errorf("%s has no fuzz target %s", a, fuzz)
		}
	}
	return nil
}

// checkBenchTarget checks that bench/run.sh has the target named.
func checkBenchTarget(args []string) error {
	if len(args) == 0 {
		return nil
	}
	src, err := os.ReadFile(filepath.Join("..", "bench", "run.sh"))
	if err != nil {
		return err
	}
	if !strings.Contains(string(src), "$what == "+args[0]+" ") && !strings.Contains(string(src), "$what == "+args[0]+"]") {
		return fmt.Errorf("bench/run.sh has no target %q", args[0])
	}
	return nil
}

// runSignatureOneLiner runs the documentation's openssl one-liner over a
// body and secret and compares its digest with webhook.Sign.
func runSignatureOneLiner(t *testing.T, where, script string) {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Logf("%s: openssl is not installed: the one-liner was not run", where)
		return
	}
	dir := t.TempDir()
	body := []byte(`{"id": "evt_1", "type": "alert.created", "test": true}` + "\n")
	if err := os.WriteFile(filepath.Join(dir, "body.json"), body, 0o600); err != nil {
		t.Fatal(err)
	}
	const secret, ts = "whsec_0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab", 1767225600
	cmd := exec.Command("bash", "-euc", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TIMESTAMP=1767225600", "WHSEC="+secret)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", where, err, out)
	}
	want := strings.TrimPrefix(webhook.Sign(secret, ts, body), webhook.SignaturePrefix)
	if f := strings.Fields(string(out)); len(f) == 0 || f[len(f)-1] != want {
		t.Errorf("%s: the one-liner printed %q, webhook.Sign gives %s", where, out, want)
	}
}

// TestReadmeAPIPaths checks that every "METHOD /path" the README and docs/
// name in their text is a route of httpapi/openapi.json.
func TestReadmeAPIPaths(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join("..", "README.md")}, files...)
	routes := openAPIRoutes(t)
	mention := regexp.MustCompile("(GET|POST|PUT|DELETE|PATCH)\\s+(/(?:api/v1|tlsrpt)/(?:[^\\s`?,;)<]|<[^>]*>)*)")
	n := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mention.FindAllStringSubmatch(string(raw), -1) {
			n++
			path := regexp.MustCompile(`<[^>]*>`).ReplaceAllString(m[2], "{x}")
			if err := findRoute(routes, m[1], path); err != nil {
				t.Errorf("%s: %v", filepath.Base(f), err)
			}
		}
	}
	if n < 10 {
		t.Errorf("found %d mentions of a method and path: the pattern lost them", n)
	}
}

// githubAnchor is the anchor GitHub gives a heading: lower case, spaces as
// dashes, punctuation other than dashes and underscores dropped.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestReadmeLinks checks every relative link of the README and docs/: the
// file exists, and an anchor is a heading of that file (the Contents
// included).
func TestReadmeLinks(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join("..", "README.md")}, files...)
	anchors := map[string]map[string]bool{} // cleaned path -> anchors
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := map[string]bool{}
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		fenced := false
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
			}
			if h, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && !fenced && strings.HasPrefix(line, "#") {
				id := githubAnchor(strings.ReplaceAll(h, "`", ""))
				for n, base := 1, id; a[id]; n++ {
					id = fmt.Sprintf("%s-%d", base, n)
				}
				a[id] = true
			}
		}
		anchors[path] = a
		return a
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	n := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(raw), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			n++
			file, anchor, _ := strings.Cut(target, "#")
			path := f
			if file != "" {
				path = filepath.Join(filepath.Dir(f), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %s: %v", filepath.Base(f), target, err)
					continue
				}
			}
			if anchor != "" && !anchorsOf(filepath.Clean(path))[anchor] {
				t.Errorf("%s: link %s: %s has no heading with that anchor", filepath.Base(f), target, filepath.Base(path))
			}
		}
	}
	if n < 30 {
		t.Errorf("found %d relative links: the pattern lost them", n)
	}
}
