// Package pgcluster starts private PostgreSQL servers for tests that must
// break one: crash it, hang it, kill its backends, fail it over to a
// streaming replica. The shared test server (OKE_TEST_DATABASE_URL,
// internal/pgtest) is never touched; each Cluster is its own initdb'ed data
// directory and postmaster on a port of its own.
//
// It uses the machine's PostgreSQL binaries: the newest
// /usr/lib/postgresql/*/bin, else `pg_config --bindir`, else initdb on PATH
// (scripts/pg installs the distribution's package). PostgreSQL refuses to
// run as root, so when the test runs as root every server command runs as
// the user postgres (created if need be) through runuser, and the data
// directory, in a temporary folder, belongs to that user.
//
// A server listens on 127.0.0.1 only, trusts every local connection
// (including replication), and has a database "test":
//
//	if err := pgcluster.Available(); err != nil {
//		pgcluster.SkipOrFail(t, err) // fails when $CI is set
//	}
//	primary, err := pgcluster.Start(ctx, pgcluster.Options{})
//	defer primary.Close()
//	replica, err := primary.StartReplica(ctx, true) // synchronous
//	defer replica.Close()
//	dsn := pgcluster.MultiHostDSN("test", primary, replica) // target_session_attrs=read-write
//	...
//	primary.Kill()             // the primary's host is gone
//	replica.Promote(ctx)       // the standby takes over
//
// Servers run with fsync off unless Options.Synchronous asks for durable
// commits: a killed process loses nothing the kernel has, only a machine
// crash would. Linux only (Pause and Kill find a postmaster's processes in
// /proc). A server outlives a test process that dies without Close; its
// data directory is in $TMPDIR/oke-pgcluster-*.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options configures Start.
type Options struct {
	// Port is the TCP port on 127.0.0.1; 0 picks a free one.
	Port int
	// Synchronous makes commits durable: fsync, full_page_writes and
	// synchronous_commit on. Without it the server runs with fsync off,
	// which a killed process does not notice (the kernel keeps what was
	// written); only a crash of the machine would lose data.
	Synchronous bool
	// Conf holds extra postgresql.conf settings (name → value, written as
	// given: quote strings yourself, e.g. "'replica'"). A replica copies
	// them.
	Conf map[string]string
}

// Cluster is one private PostgreSQL server: a data directory and, while it
// runs, its postmaster. Its methods are safe for concurrent use.
type Cluster struct {
	bindir string
	base   string // temporary folder owned by the server's user: data/, server.log
	data   string
	port   int
	name   string // cluster_name, the application_name a replica streams as

	mu      sync.Mutex
	paused  []int
	closed  bool
	primary *Cluster      // set on a replica
	exited  chan struct{} // closed when the postmaster this started has exited
}

// Available says whether Start can run here: nil when it can, else an
// error saying why not and how to fix it.
func Available() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("pgcluster runs on Linux only (this is %s)", runtime.GOOS)
	}
	if _, err := bindir(); err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		if _, err := exec.LookPath("runuser"); err != nil {
			return errors.New("running as root, and PostgreSQL refuses to: pgcluster needs runuser (util-linux) to run it as the user postgres")
		}
		if _, err := user.Lookup("postgres"); err != nil {
			if _, err := exec.LookPath("useradd"); err != nil {
				return errors.New("running as root with no user postgres to run PostgreSQL as, and no useradd to create one")
			}
		}
	}
	return nil
}

// SkipOrFail ends a test that needs a private server when Available
// reported err: it fails when $CI is set (CI must run these tests; run
// scripts/pg as root once to install PostgreSQL) and is skipped otherwise.
func SkipOrFail(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("a private PostgreSQL server is needed and CI is set, so this test must run: %v (scripts/pg installs the postgresql package as root)", err)
	}
	t.Skipf("no private PostgreSQL server: %v (scripts/pg installs the postgresql package as root)", err)
}

// Require returns when Available is nil, and ends the test as SkipOrFail
// does otherwise.
func Require(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		SkipOrFail(t, err)
	}
}

var (
	bindirOnce sync.Once
	bindirPath string
	bindirErr  error
)

// bindir finds the PostgreSQL binaries, as scripts/pg does.
func bindir() (string, error) {
	bindirOnce.Do(func() {
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
		for _, d := range dirs {
			if executable(filepath.Join(d, "initdb")) {
				bindirPath = d
				return
			}
		}
		if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
			d := strings.TrimSpace(string(out))
			if executable(filepath.Join(d, "initdb")) {
				bindirPath = d
				return
			}
		}
		if p, err := exec.LookPath("initdb"); err == nil {
			bindirPath = filepath.Dir(p)
			return
		}
		bindirErr = errors.New("no PostgreSQL binaries (initdb) in /usr/lib/postgresql/*/bin, pg_config --bindir or PATH")
	})
	return bindirPath, bindirErr
}

func versionOf(dir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64)
	return v
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// serverUser is who runs the server's commands: "" for this process's user,
// "postgres" when this process is root.
func serverUser() string {
	if os.Geteuid() == 0 {
		return "postgres"
	}
	return ""
}

var userOnce sync.Once

// ensureUser creates the user postgres when running as root without one.
func ensureUser() error {
	if serverUser() == "" {
		return nil
	}
	var err error
	userOnce.Do(func() {
		if _, lerr := user.Lookup("postgres"); lerr == nil {
			return
		}
		out, cerr := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres").CombinedOutput()
		if cerr != nil {
			err = fmt.Errorf("create the user postgres: %v: %s", cerr, out)
		}
	})
	return err
}

// command runs one of the server's binaries as the server's user.
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	bin := filepath.Join(c.bindir, name)
	if u := serverUser(); u != "" {
		return exec.CommandContext(ctx, "runuser", append([]string{"-u", u, "--", bin}, args...)...)
	}
	return exec.CommandContext(ctx, bin, args...)
}

func (c *Cluster) run(ctx context.Context, name string, args ...string) error {
	out, err := c.command(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// newBase makes the temporary folder of a server, owned by its user.
func newBase(name string) (*Cluster, error) {
	dir, err := bindir()
	if err != nil {
		return nil, err
	}
	if err := ensureUser(); err != nil {
		return nil, err
	}
	base, err := os.MkdirTemp("", "oke-pgcluster-")
	if err != nil {
		return nil, err
	}
	if u := serverUser(); u != "" {
		if err := chownTo(base, u); err != nil {
			os.RemoveAll(base)
			return nil, err
		}
	}
	return &Cluster{bindir: dir, base: base, data: filepath.Join(base, "data"), name: name}, nil
}

func chownTo(path, username string) error {
	uid, gid, err := ids(username)
	if err != nil {
		return err
	}
	return os.Chown(path, uid, gid)
}

func ids(username string) (uid, gid int, err error) {
	u, err := user.Lookup(username)
	if err != nil {
		return 0, 0, err
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid, nil
}

var nameSeq struct {
	sync.Mutex
	n int
}

func nextName(prefix string) string {
	nameSeq.Lock()
	defer nameSeq.Unlock()
	nameSeq.n++
	return fmt.Sprintf("%s%d_%d", prefix, os.Getpid(), nameSeq.n)
}

// Start initdb's a new server, starts it and creates the database "test".
// Close it when done.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	c, err := newBase(nextName("oke_primary_"))
	if err != nil {
		return nil, err
	}
	if err := c.run(ctx, "initdb", "-D", c.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		c.Close()
		return nil, err
	}
	conf := map[string]string{
		"listen_addresses":   "'127.0.0.1'",
		"shared_buffers":     "'32MB'",
		"max_connections":    "100",
		"wal_level":          "replica",
		"max_wal_senders":    "10",
		"hot_standby":        "on",
		"wal_keep_size":      "'64MB'",
		"log_min_messages":   "warning",
		"log_line_prefix":    "'%m [%p] '",
		"fsync":              "off",
		"full_page_writes":   "off",
		"synchronous_commit": "on",
	}
	if opts.Synchronous {
		conf["fsync"] = "on"
		conf["full_page_writes"] = "on"
	}
	for k, v := range opts.Conf {
		conf[k] = v
	}
	if err := appendConf(filepath.Join(c.data, "postgresql.conf"), conf); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.startOn(ctx, opts.Port); err != nil {
		c.Close()
		return nil, err
	}
	conn, err := c.connect(ctx, "postgres")
	if err == nil {
		_, err = conn.Exec(ctx, "CREATE DATABASE test")
		conn.Close(context.WithoutCancel(ctx))
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("create database test: %w", err)
	}
	return c, nil
}

func appendConf(path string, conf map[string]string) error {
	keys := make([]string, 0, len(conf))
	for k := range conf {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("\n# pgcluster\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = %s\n", k, conf[k])
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// startOn starts the postmaster on port, or on a free port when port is 0
// (trying another if one is taken before the server binds it).
func (c *Cluster) startOn(ctx context.Context, port int) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		p := port
		if p == 0 {
			if p, err = freePort(); err != nil {
				return err
			}
		}
		c.mu.Lock()
		c.port = p
		c.mu.Unlock()
		if err = c.start(ctx); err == nil || port != 0 || !strings.Contains(c.logTail(), "could not bind") {
			return err
		}
	}
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs the postmaster on c.port and waits until it accepts
// connections (read-only ones, for a standby). The postmaster is a child of
// this process, not of pg_ctl, so that this process reaps it when it is
// killed: an unreaped postmaster would look alive to the next one started on
// the same data, which would refuse to start.
func (c *Cluster) start(ctx context.Context) error {
	bin := filepath.Join(c.bindir, "postgres")
	cmd := exec.Command(bin, "-D", c.data, "-p", strconv.Itoa(c.port), "-k", c.base, "-c", "cluster_name="+c.name)
	log, err := os.OpenFile(filepath.Join(c.base, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = c.base
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if u := serverUser(); u != "" {
		uid, gid, err := ids(u)
		if err != nil {
			return err
		}
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		cmd.Env = append(os.Environ(), "HOME="+c.base, "USER="+u, "LOGNAME="+u)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	c.mu.Lock()
	c.exited = exited
	c.mu.Unlock()
	// The postmaster writes its status in the last line of postmaster.pid
	// ("ready", or "standby" for a standby) once it accepts connections.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		if b, err := os.ReadFile(filepath.Join(c.data, "postmaster.pid")); err == nil {
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if pid, _ := strconv.Atoi(lines[0]); pid == cmd.Process.Pid && len(lines) >= 8 {
				if st := strings.TrimSpace(lines[7]); st == "ready" || st == "standby" {
					return nil
				}
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("postgres exited at start\nserver log:\n%s", c.logTail())
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("postgres does not accept connections: %w\nserver log:\n%s", ctx.Err(), c.logTail())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// logTail is the end of the server's log, for errors.
func (c *Cluster) logTail() string {
	b, _ := os.ReadFile(filepath.Join(c.base, "server.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Log returns the server's log so far (for a failing test's message).
func (c *Cluster) Log() string {
	b, _ := os.ReadFile(filepath.Join(c.base, "server.log"))
	return string(b)
}

// DSN is the URL of database db on this server.
func (c *Cluster) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port(), db)
}

// MultiHostDSN is the URL of database db on the first of servers that
// accepts writes (target_session_attrs=read-write): the DSN an application
// uses against a primary and its standbys, which finds the new primary after
// a failover.
func MultiHostDSN(db string, servers ...*Cluster) string {
	hosts := make([]string, len(servers))
	for i, s := range servers {
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", s.Port())
	}
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable&target_session_attrs=read-write", strings.Join(hosts, ","), db)
}

// Port is the server's TCP port on 127.0.0.1.
func (c *Cluster) Port() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.port
}

// DataDir is the server's data directory.
func (c *Cluster) DataDir() string { return c.data }

func (c *Cluster) connect(ctx context.Context, db string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(c.DSN(db))
	if err != nil {
		return nil, err
	}
	cfg.ConnectTimeout = 10 * time.Second
	return pgx.ConnectConfig(ctx, cfg)
}

// Query runs one statement on database db of this server over a connection
// of its own and returns the first column of its first row as text ("" when
// there is no row): for a test's checks and setup.
func (c *Cluster) Query(ctx context.Context, db, sql string, args ...any) (string, error) {
	conn, err := c.connect(ctx, db)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var out string
	if rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return "", err
		}
		if len(vals) > 0 && vals[0] != nil {
			out = fmt.Sprint(vals[0])
		}
	}
	return out, rows.Err()
}

// Stop shuts the server down cleanly (pg_ctl stop -m fast); its data is
// kept, for Restart.
func (c *Cluster) Stop(ctx context.Context) error {
	if err := c.Resume(); err != nil {
		return err
	}
	return c.run(ctx, "pg_ctl", "-D", c.data, "-m", "fast", "-w", "-t", "120", "stop")
}

// Kill crashes the server: SIGKILL to the postmaster and every process of
// it (backends, WAL sender, checkpointer…), as when its machine dies, and
// waits until they are gone. Its connections break at once; the data stays,
// and Restart recovers it.
func (c *Cluster) Kill() error {
	pm, err := c.postmaster()
	if err != nil {
		return err
	}
	pids := append([]int{pm}, children(pm)...)
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	c.mu.Lock()
	c.paused = nil
	exited := c.exited
	c.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	if exited != nil {
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			return fmt.Errorf("postmaster %d still runs 30 s after SIGKILL", pm)
		}
	}
	for _, p := range pids[1:] {
		for alive(p) {
			if time.Now().After(deadline) {
				return fmt.Errorf("process %d of the server still runs 30 s after SIGKILL", p)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}

// alive says whether process pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, state, _, ok := parseStat(string(b))
	return ok && state != "Z" && state != "X"
}

// Restart starts a stopped, killed or crashed server again on the same port
// and data (after a kill, it runs crash recovery first).
func (c *Cluster) Restart(ctx context.Context) error {
	return c.start(ctx)
}

// Pause stops the server without closing anything (SIGSTOP to the
// postmaster and all its processes): a hung server, whose connections stay
// open and answer nothing. Resume ends it.
func (c *Cluster) Pause() error {
	pm, err := c.postmaster()
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// The postmaster first, so that it forks nothing new meanwhile.
	if err := syscall.Kill(pm, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("SIGSTOP postmaster %d: %w", pm, err)
	}
	c.paused = append(c.paused, pm)
	for _, p := range children(pm) {
		if syscall.Kill(p, syscall.SIGSTOP) == nil {
			c.paused = append(c.paused, p)
		}
	}
	return nil
}

// Resume continues a paused server (SIGCONT to what Pause stopped); it does
// nothing for a server that is not paused.
func (c *Cluster) Resume() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Backends first, the postmaster last, in the reverse of Pause.
	for i := len(c.paused) - 1; i >= 0; i-- {
		_ = syscall.Kill(c.paused[i], syscall.SIGCONT)
	}
	c.paused = nil
	return nil
}

// postmaster reads the postmaster's pid from its lock file.
func (c *Cluster) postmaster() (int, error) {
	b, err := os.ReadFile(filepath.Join(c.data, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("the server does not run: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("bad postmaster.pid: %q", line)
	}
	if !alive(pid) {
		return 0, fmt.Errorf("the server does not run (postmaster %d is gone)", pid)
	}
	return pid, nil
}

// children lists the processes whose parent is pid (a postmaster's
// processes are all its direct children).
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		_, _, ppid, ok := parseStat(string(b))
		if ok && ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

// parseStat reads the command, state and parent of /proc/PID/stat (the
// command is in parentheses and may hold spaces).
func parseStat(s string) (comm, state string, ppid int, ok bool) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", "", 0, false
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 2 {
		return "", "", 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return s[open+1 : end], f[0], ppid, err == nil
}

// TerminateBackends ends every client backend connected to database db
// except the one it uses to do so (pg_terminate_backend): the connections
// of the server's clients break, as when an operator kills them. It returns
// how many it ended.
func (c *Cluster) TerminateBackends(ctx context.Context, db string) (int, error) {
	s, err := c.Query(ctx, "postgres", `SELECT count(*) FROM (
		SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = $1 AND pid <> pg_backend_pid() AND backend_type = 'client backend') t`, db)
	if err != nil {
		return 0, fmt.Errorf("terminate backends: %w", err)
	}
	n, _ := strconv.Atoi(s)
	return n, nil
}

// StartReplica makes a streaming standby of c (pg_basebackup -R, on a free
// port) and starts it. When synchronous, c's synchronous_standby_names
// names it, and StartReplica returns once c reports it as its synchronous
// standby: from then on a commit on c returns only after the standby has it
// (synchronous_commit = on: flushed to its WAL), so a failover to it loses
// no acknowledged transaction — and c's commits wait while it is down.
func (c *Cluster) StartReplica(ctx context.Context, synchronous bool) (*Cluster, error) {
	r, err := newBase(nextName("oke_replica_"))
	if err != nil {
		return nil, err
	}
	r.primary = c
	if err := r.run(ctx, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(c.Port()), "-U", "postgres",
		"-D", r.data, "-R", "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		r.Close()
		return nil, err
	}
	// A standby copied from a primary that waits for another standby would
	// wait for it too once promoted: it starts with no synchronous standby.
	if err := dropSetting(filepath.Join(r.data, "postgresql.auto.conf"), "synchronous_standby_names"); err != nil {
		r.Close()
		return nil, err
	}
	if err := r.startOn(ctx, 0); err != nil {
		r.Close()
		return nil, err
	}
	if err := r.waitStreaming(ctx, synchronous); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// waitStreaming sets r as c's synchronous standby when asked, and waits
// until c's pg_stat_replication shows r streaming (in sync when asked).
func (r *Cluster) waitStreaming(ctx context.Context, synchronous bool) error {
	c := r.primary
	if synchronous {
		if _, err := c.Query(ctx, "postgres", fmt.Sprintf(`ALTER SYSTEM SET synchronous_standby_names = '"%s"'`, r.name)); err != nil {
			return fmt.Errorf("set synchronous_standby_names: %w", err)
		}
		if _, err := c.Query(ctx, "postgres", `SELECT pg_reload_conf()`); err != nil {
			return err
		}
	}
	want := "async"
	if synchronous {
		want = "sync"
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		state, err := c.Query(ctx, "postgres", `SELECT sync_state FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'`, r.name)
		if err == nil && state == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the replica %s is not streaming %s to its primary (state %q, %v)\nreplica log:\n%s", r.name, want, state, err, r.logTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// dropSetting removes the lines setting name from a configuration file.
func dropSetting(path, name string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), name) {
			continue
		}
		keep = append(keep, l)
	}
	return os.WriteFile(path, []byte(strings.Join(keep, "\n")), 0o600)
}

// Promote makes a standby the primary (pg_ctl promote) and returns once it
// accepts writes.
func (c *Cluster) Promote(ctx context.Context) error {
	if err := c.run(ctx, "pg_ctl", "-D", c.data, "-w", "-t", "120", "promote"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		s, err := c.Query(ctx, "postgres", `SELECT pg_is_in_recovery()`)
		if err == nil && s == "false" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the promoted server does not accept writes (in recovery: %q, %v)", s, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Close stops the server at once (pg_ctl stop -m immediate, or SIGKILL
// when that fails) and removes its data. It is safe to call twice.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	_ = c.Resume()
	var err error
	if _, perr := c.postmaster(); perr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err = c.run(ctx, "pg_ctl", "-D", c.data, "-m", "immediate", "-w", "-t", "60", "stop")
		cancel()
		if err != nil {
			if kerr := c.Kill(); kerr == nil {
				err = nil
			}
		}
	}
	if rerr := os.RemoveAll(c.base); rerr != nil && err == nil {
		err = rerr
	}
	return err
}
