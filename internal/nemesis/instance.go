package nemesis

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// An Instance is one process of the demo, restarted on the same address
// and flags after each kill.
type Instance struct {
	Name string
	Bin  string
	Args []string // the demo's flags, without -addr
	Addr string   // host:port, fixed across restarts
	Log  string   // the file its stderr and stdout are appended to
	// Pprof, when set, is a loopback host:port the process serves
	// net/http/pprof on (OKE_PPROF), for Goroutines.
	Pprof string

	cmd    *exec.Cmd
	exited chan struct{}
}

// FreeAddr returns a loopback address with a port free just now.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// URL is the instance's base URL.
func (i *Instance) URL() string { return "http://" + i.Addr }

// Start runs the process and waits until it answers GET /healthz, for at
// most timeout.
func (i *Instance) Start(timeout time.Duration) error {
	f, err := os.OpenFile(i.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "==== nemesis: start %s at %s\n", i.Name, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(i.Bin, append([]string{"-addr", i.Addr}, i.Args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	if i.Pprof != "" {
		cmd.Env = append(os.Environ(), "OKE_PPROF="+i.Pprof)
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	i.cmd, i.exited = cmd, make(chan struct{})
	go func() { cmd.Wait(); f.Close(); close(i.exited) }()

	deadline := time.Now().Add(timeout)
	c := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-i.exited:
			return fmt.Errorf("instance %s exited at start (%s); its log ends:\n%s", i.Name, cmd.ProcessState, i.LogTail(2000))
		default:
		}
		resp, err := c.Get(i.URL() + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			i.Kill()
			return fmt.Errorf("instance %s did not answer /healthz within %s; its log ends:\n%s", i.Name, timeout, i.LogTail(2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Running reports whether the process is alive (possibly stopped).
func (i *Instance) Running() bool {
	if i.cmd == nil {
		return false
	}
	select {
	case <-i.exited:
		return false
	default:
		return true
	}
}

// Signal sends sig to the process.
func (i *Instance) Signal(sig syscall.Signal) error {
	if !i.Running() {
		return fmt.Errorf("instance %s is not running", i.Name)
	}
	return i.cmd.Process.Signal(sig)
}

// Kill SIGKILLs the process (continuing it first if stopped, so that it
// dies now) and waits for it to exit.
func (i *Instance) Kill() {
	if !i.Running() {
		return
	}
	i.cmd.Process.Signal(syscall.SIGKILL)
	i.cmd.Process.Signal(syscall.SIGCONT)
	<-i.exited
}

// Terminate stops the process gracefully (SIGTERM), or kills it after
// timeout.
func (i *Instance) Terminate(timeout time.Duration) {
	if !i.Running() {
		return
	}
	i.cmd.Process.Signal(syscall.SIGCONT)
	i.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-i.exited:
	case <-time.After(timeout):
		i.Kill()
	}
}

// Goroutines is the stacks of every goroutine of the process
// (net/http/pprof's goroutine?debug=2), when Pprof is set: what a hung
// request waits on.
func (i *Instance) Goroutines() ([]byte, error) {
	if i.Pprof == "" {
		return nil, fmt.Errorf("instance %s serves no pprof", i.Name)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + i.Pprof + "/debug/pprof/goroutine?debug=2")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// LogTail is the last n bytes of the instance's log.
func (i *Instance) LogTail(n int) string {
	b, _ := os.ReadFile(i.Log)
	if len(b) > n {
		b = b[len(b)-n:]
		if j := bytes.IndexByte(b, '\n'); j >= 0 {
			b = b[j+1:]
		}
	}
	return string(b)
}

// Healthy waits until the instance answers GET /healthz, for at most
// timeout.
func (i *Instance) Healthy(ctx context.Context, timeout time.Duration) bool {
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		resp, err := c.Get(i.URL() + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}
