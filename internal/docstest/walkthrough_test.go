package docstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke/examples/payments/app"
	"github.com/okengine/oke/internal/modtest"
)

// The curl walkthroughs: the shell blocks of README.md and docs/*.md marked
// docs:run. Their conventions are in doc.go.

// shellLangs are the fence languages of shell blocks.
var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

var (
	demoCurl   = regexp.MustCompile(`\bcurl\b.*\b(?:localhost|127\.0\.0\.1):8080\b`)
	demoAddr   = regexp.MustCompile(`\b(?:localhost|127\.0\.0\.1):8080\b`)
	outputNote = regexp.MustCompile(`\s{2,}\(.*\)\s*$`)
	statusNote = regexp.MustCompile(`^\d{3}\b`)
)

// A command is one command of a walkthrough: a line, with its continuation
// lines, and the output the doc shows under it.
type command struct {
	doc  string
	line int
	src  string
	want []shown
}

func (c command) String() string { return fmt.Sprintf("%s:%d", c.doc, c.line) }

// shown is one line of a command's output as the doc shows it.
type shown struct {
	line int
	text string
	re   *regexp.Regexp
}

// outputPattern is the regular expression of a shown output line: the line
// without its note, … for any text.
func outputPattern(text string) *regexp.Regexp {
	text = strings.TrimSpace(outputNote.ReplaceAllString(text, ""))
	parts := strings.Split(text, "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
}

// commands splits a run block into its commands.
func commands(b block) ([]command, error) {
	var cmds []command
	last := -1 // the command whose output the comment lines below show
	lines := strings.Split(strings.TrimSuffix(b.src, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		n := b.line + 1 + i
		t := strings.TrimSpace(lines[i])
		switch {
		case t == "":
			last = -1
		case strings.HasPrefix(t, "#"):
			if last >= 0 {
				text := strings.TrimSpace(strings.TrimPrefix(t, "#"))
				cmds[last].want = append(cmds[last].want, shown{line: n, text: text, re: outputPattern(text)})
			}
		default:
			c := command{doc: b.doc, line: n, src: lines[i]}
			for strings.HasSuffix(c.src, `\`) && i+1 < len(lines) {
				i++
				c.src += "\n" + lines[i]
			}
			if note := trailingComment(c.src); statusNote.MatchString(note) {
				return nil, fmt.Errorf("%s: the comment %q after the command states a status the test cannot check: show what the command prints on the lines under it (e.g. `# HTTP/1.1 201 Created` for curl -i)", c, "# "+note)
			}
			cmds = append(cmds, c)
			last = len(cmds) - 1
		}
	}
	return cmds, nil
}

// trailingComment returns the text of a command's comment after its last
// line's code ("" if none), reading shell quotes.
func trailingComment(src string) string {
	var quote rune
	prevSpace := true
	for i, r := range src {
		switch {
		case quote == '\'':
			if r == '\'' {
				quote = 0
			}
		case quote == '"':
			if r == '"' && (i == 0 || src[i-1] != '\\') {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && prevSpace:
			return strings.TrimSpace(src[i+1:])
		}
		prevSpace = r == ' ' || r == '\t' || r == '\n'
	}
	return ""
}

// A page is the run blocks of one doc, in order.
type page struct {
	doc  string
	cmds []command
}

// walkthroughs returns the run blocks of the docs at root, by page, and
// reports the shell blocks that call the demo unmarked.
func walkthroughs(t *testing.T, root string) (pages []page, blocks int) {
	t.Helper()
	for _, doc := range docs(t, root) {
		text, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		bs, err := parse(doc, string(text))
		if err != nil {
			t.Fatal(err)
		}
		p := page{doc: doc}
		for _, b := range bs {
			if !shellLangs[b.lang] {
				if b.run {
					t.Errorf("%s: a docs:run marker on a ```%s block: only shell blocks (%s) run", b, b.lang, "sh, bash, shell, console")
				}
				continue
			}
			switch {
			case b.skip != "":
				if demoCurl.MatchString(b.src) {
					t.Logf("%s: walkthrough skipped: %s", b, b.skip)
				}
				continue
			case !b.run:
				if demoCurl.MatchString(b.src) {
					t.Errorf("%s: a shell block that calls the demo (curl localhost:8080) is neither marked <!-- docs:run --> (and shows what it prints) nor <!-- docs:skip REASON -->", b)
				}
				continue
			}
			cmds, err := commands(b)
			if err != nil {
				t.Error(err)
				continue
			}
			blocks++
			p.cmds = append(p.cmds, cmds...)
		}
		if len(p.cmds) > 0 {
			pages = append(pages, p)
		}
	}
	return pages, blocks
}

// TestWalkthroughs runs the curl walkthroughs of README.md and docs/*.md
// (the shell blocks marked docs:run) against the demo, each page in a shell
// of its own against a demo of its own, and checks that every command
// prints what the doc shows under it.
func TestWalkthroughs(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the walkthroughs run with bash and curl: %v (install it)", err)
		}
	}
	root := modtest.Root(t)
	pages, blocks := walkthroughs(t, root)
	if len(pages) == 0 {
		t.Fatal("no docs:run block in README.md or docs/*.md")
	}
	var mu sync.Mutex
	ran, checked := 0, 0
	t.Cleanup(func() {
		t.Logf("walkthroughs: %d blocks on %d pages; %d commands ran, %d shown output lines checked", blocks, len(pages), ran, checked)
	})
	for _, p := range pages {
		t.Run(strings.ReplaceAll(p.doc, "/", "_"), func(t *testing.T) {
			t.Parallel()
			r, c := runPage(t, p)
			mu.Lock()
			ran, checked = ran+r, checked+c
			mu.Unlock()
		})
	}
}

// runPage runs a page's walkthrough in one bash against a fresh demo and
// checks each command's output. It returns how many commands ran and how
// many shown lines it checked.
func runPage(t *testing.T, p page) (ran, checked int) {
	work := t.TempDir()
	addr := startDemo(t, work)
	out := t.TempDir() // each command's stdout and stderr, and which one runs
	var sh strings.Builder
	sh.WriteString("set -euo pipefail\n")
	for i, c := range p.cmds {
		fmt.Fprintf(&sh, "echo %d >'%s/at'\n{\n%s\n} >'%s/%d.out' 2>'%s/%d.err'\n",
			i, out, demoAddr.ReplaceAllString(c.src, addr), out, i, out, i)
	}
	fmt.Fprintf(&sh, "wait\necho %d >'%s/at'\n", len(p.cmds), out)
	script := filepath.Join(out, "walkthrough.sh")
	if err := os.WriteFile(script, []byte(sh.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	// The bound is for a walkthrough that hangs (a loop whose condition
	// never holds): it turns a hang into a failure naming the command.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", script)
	cmd.Dir = work
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + work, "LANG=C.UTF-8", "LC_ALL=C.UTF-8"}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	cmd.WaitDelay = 5 * time.Second
	runErr := cmd.Run()

	at := len(p.cmds)
	if b, err := os.ReadFile(filepath.Join(out, "at")); err == nil {
		at, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	read := func(i int, ext string) string {
		b, _ := os.ReadFile(filepath.Join(out, strconv.Itoa(i)+ext))
		return string(b)
	}
	for i := 0; i < at && i < len(p.cmds); i++ {
		ran++
		problem, n := check(p.cmds[i], read(i, ".out"), read(i, ".err"))
		if problem != "" {
			t.Error(problem)
		}
		checked += n
	}
	if runErr != nil {
		if at < len(p.cmds) {
			c := p.cmds[at]
			ran++
			what := "failed (" + runErr.Error() + ")"
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				what = "did not end in 2m"
			}
			t.Errorf("%s: the command %s; later commands of the page did not run\n\t$ %s\n--- stdout:\n%s--- stderr:\n%s",
				c, what, c.src, read(at, ".out"), read(at, ".err"))
		} else {
			t.Errorf("%s: the walkthrough's shell failed after its last command (waiting for its background jobs): %v\n%s", p.doc, runErr, stderr.String())
		}
	}
	return ran, checked
}

// check compares what a command printed with what the doc shows under it.
// It returns the problem ("" if none) and how many shown lines it checked.
func check(c command, stdout, stderr string) (problem string, checked int) {
	var lines []string
	for _, l := range strings.Split(stdout, "\n") {
		lines = append(lines, strings.TrimSpace(l))
	}
	if len(c.want) == 0 {
		if strings.TrimSpace(stdout) != "" {
			return fmt.Sprintf("%s: the command prints, but the doc shows none of it: show what it prints on `# ` lines right under it (or send it to /dev/null)\n\t$ %s\n--- it printed:\n%s",
				c, c.src, stdout), 0
		}
		return "", 0
	}
	j := 0
	for _, w := range c.want {
		for j < len(lines) && !w.re.MatchString(lines[j]) {
			j++
		}
		if j == len(lines) {
			return fmt.Sprintf("%s: the command does not print what the doc shows under it\n\t$ %s\n\tline %d shows:  %s\n\t(in this order after the lines shown above it; … is any text)\n--- it printed:\n%s--- stderr:\n%s",
				c, c.src, w.line, w.text, stdout, stderr), len(c.want)
		}
		j++
	}
	return "", len(c.want)
}

// startDemo runs the demo (app.Run, as go run ./examples/payments does) on
// the file driver with its data in work/.oke, on a free port, until the
// test ends, and returns its address.
func startDemo(t *testing.T, work string) string {
	t.Helper()
	cfg := app.DefaultConfig()
	cfg.Addr, cfg.DataDir = "127.0.0.1:0", filepath.Join(work, ".oke")
	cfg.AdminToken = "" // drawn and written to .oke/admin-token, as for a reader without $OKE_ADMIN_TOKEN
	log := &demoLog{listening: make(chan string, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var runErr error
	go func() { defer close(done); runErr = app.Run(ctx, cfg, log) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if runErr != nil {
			t.Errorf("the demo: %v\n--- its log:\n%s", runErr, log)
		}
	})
	select {
	case addr := <-log.listening:
		return addr
	case <-done:
		t.Fatalf("the demo stopped before it listened: %v\n--- its log:\n%s", runErr, log)
		return ""
	}
}

// demoLog is the demo's stderr: it keeps the text and sends the address of
// the line "payments: listening on http://ADDR" once.
type demoLog struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	listening chan string
	sent      bool
}

var listeningLine = regexp.MustCompile(`(?m)^payments: listening on http://(\S+) `)

func (l *demoLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if !l.sent {
		if m := listeningLine.FindSubmatch(l.buf.Bytes()); m != nil {
			l.sent = true
			l.listening <- string(m[1])
		}
	}
	return len(p), nil
}

func (l *demoLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// The rules a walkthrough's author relies on: what counts as a command's
// shown output, and when it is a mismatch.
func TestWalkthroughRules(t *testing.T) {
	b := block{doc: "x.md", line: 10, src: strings.Join([]string{
		`K=k-$(date +%s%N)   # a note`, // 11: prints nothing, shows nothing
		`curl -si localhost:8080/a \`,  // 12
		`     -d '{"a":1}'`,            // 13
		`# HTTP/1.1 201 Created         (live)`,
		`# Location: /a/…`,
		``,
		`# prose after a blank line`,
		`curl -s localhost:8080/b | grep 'x # not a comment'`, // 18
	}, "\n") + "\n"}
	cmds, err := commands(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 3 || cmds[0].line != 11 || cmds[1].line != 12 || cmds[2].line != 18 {
		t.Fatalf("commands: %+v", cmds)
	}
	if len(cmds[0].want) != 0 || len(cmds[1].want) != 2 || len(cmds[2].want) != 0 {
		t.Fatalf("shown lines: %d, %d, %d; want 0, 2, 0 (the prose after the blank line is no output)",
			len(cmds[0].want), len(cmds[1].want), len(cmds[2].want))
	}
	if !strings.Contains(cmds[1].src, "\n") {
		t.Errorf("the continuation line is not part of the command: %q", cmds[1].src)
	}
	if got := trailingComment(cmds[2].src); got != "" {
		t.Errorf("a # inside quotes read as a comment: %q", got)
	}

	ok := "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nLocation: /a/1\r\n\r\n{}"
	for _, tc := range []struct {
		name, stdout string
		c            command
		wantProblem  string // a fragment of the problem; "" for none
	}{
		{"shown lines in order, a note and … allowed", ok, cmds[1], ""},
		{"another status", strings.Replace(ok, "201 Created", "200 OK", 1), cmds[1], "line 14 shows:  HTTP/1.1 201 Created"},
		{"out of order", "Location: /a/1\nHTTP/1.1 201 Created\n", cmds[1], "line 15 shows:  Location: /a/…"},
		{"a shown line is a whole line", "HTTP/1.1 201 Created, almost\nLocation: /a/1\n", cmds[1], "line 14 shows"},
		{"printed but shown nothing", "{}\n", cmds[2], "the doc shows none of it"},
		{"shown nothing, printed nothing", "", cmds[0], ""},
	} {
		problem, _ := check(tc.c, tc.stdout, "")
		if tc.wantProblem == "" && problem != "" || !strings.Contains(problem, tc.wantProblem) {
			t.Errorf("%s: problem %q, want one with %q", tc.name, problem, tc.wantProblem)
		}
	}

	if _, err := commands(block{doc: "x.md", line: 1, src: "curl -s localhost:8080/c   # 201, created\n"}); err == nil {
		t.Error("a trailing comment that states a status is accepted: it would go unchecked")
	}
}
