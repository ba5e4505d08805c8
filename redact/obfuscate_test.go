package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func obfRedactor(t *testing.T, key []byte) *Redactor {
	t.Helper()
	cfg, err := ParseConfig([]byte("obfuscate:\n  hostname_patterns: ['db[0-9]+\\.corp\\.example']\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Build(cfg, Options{
		Obfuscate: []string{"ip", "hostname", "mac", "user"},
		Key:       key,
		Hostnames: []string{"node-b17", "node-b17.corp.example"},
		Users:     []string{"alice"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestObfuscation(t *testing.T) {
	r := obfRedactor(t, testKey)
	tok := func(cat, v string) string {
		var n [256]byte
		norm := []byte(v)
		if cat != "user" {
			norm = lowerInto(norm, n[:])
		}
		return r.obf.token(catIndex(cat), string(norm))
	}
	ip, ip6, mac := tok("ip", "10.0.0.5"), tok("ip", "fd00::1"), tok("mac", "0a:1b:2c:3d:4e:5f")
	host, fqdn, db := tok("hostname", "node-b17"), tok("hostname", "node-b17.corp.example"), tok("hostname", "db7.corp.example")
	alice, bob := tok("user", "alice"), tok("user", "bob")
	cases := []struct{ in, want string }{
		{"src=10.0.0.5:6443 dst=[fd00::1]:443", "src=" + ip + ":6443 dst=[" + ip6 + "]:443"},
		{"inet 10.0.0.5/24 brd 10.0.0.255", "inet " + ip + "/24 brd " + tok("ip", "10.0.0.255")},
		{"link/ether 0A:1B:2C:3D:4E:5F brd ff:ff:ff:ff:ff:ff", "link/ether " + mac + " brd ff:ff:ff:ff:ff:ff"},
		{"node-b17.corp.example Ready; pod etcd-node-b17 on Node-B17", fqdn + " Ready; pod etcd-" + host + " on " + host},
		{"connecting to db7.corp.example:5432", "connecting to " + db + ":5432"},
		{"session opened for user alice by (uid=0); /home/bob/.kube/config", "session opened for user " + alice + " by (uid=0); /home/" + bob + "/.kube/config"},
		{"https://alice:pw0rd1234@10.0.0.5/x", "https://" + alice + ":[REDACTED]@" + ip + "/x"},
		// Not addresses, not this node.
		{"v1.28.3.4 version 1.2.3.4 1.2.3 253:0 12:00:00 127.0.0.1 node-b170 alicex", "v1.28.3.4 version 1.2.3.4 1.2.3 253:0 12:00:00 127.0.0.1 node-b170 alicex"},
	}
	for _, c := range cases {
		got, _ := r.String(c.in)
		if got != c.want {
			t.Errorf("%q\n got %q\nwant %q", c.in, got, c.want)
		}
		// Obfuscated output goes through again unchanged (re-redaction).
		if again, _ := r.String(got); again != got {
			t.Errorf("not idempotent: %q -> %q", got, again)
		}
	}
	for _, s := range []string{ip, host, mac, alice} {
		if !regexp.MustCompile(`^(ip|host|mac|user)-[0-9a-f]{12}$`).MatchString(s) {
			t.Errorf("token %q has the wrong shape", s)
		}
	}
	m := r.Mappings()
	for tk, orig := range map[string]string{ip: "10.0.0.5", ip6: "fd00::1", mac: "0a:1b:2c:3d:4e:5f", host: "node-b17", fqdn: "node-b17.corp.example", db: "db7.corp.example", alice: "alice", bob: "bob"} {
		if m[tk] != orig {
			t.Errorf("mapping %s = %q, want %q", tk, m[tk], orig)
		}
	}
	for tk, orig := range m {
		if strings.Contains(orig, "pw0rd") {
			t.Errorf("a secret reached the mapping: %s=%s", tk, orig)
		}
	}
}

// TestObfuscationConsistent: two Redactors built separately with the same
// key (as two collector processes are) give the same token for the same
// value in different files; a different key gives different tokens.
func TestObfuscationConsistent(t *testing.T) {
	a, b := obfRedactor(t, testKey), obfRedactor(t, testKey)
	other := obfRedactor(t, []byte("another run's key, 32 bytes long"))
	outA, _ := a.String("mountinfo: 10.0.0.9:/export /mnt nfs on node-b17\n")
	outB, _ := b.String(`{"podIP":"10.0.0.9","nodeName":"node-b17"}` + "\n")
	outO, _ := other.String("10.0.0.9\n")
	tokA := regexp.MustCompile(`ip-[0-9a-f]{12}`).FindString(outA)
	tokB := regexp.MustCompile(`ip-[0-9a-f]{12}`).FindString(outB)
	if tokA == "" || tokA != tokB {
		t.Fatalf("tokens differ across redactors: %q vs %q (%s / %s)", tokA, tokB, outA, outB)
	}
	if strings.Contains(outO, tokA) {
		t.Errorf("a different key produced the same token %s", tokA)
	}
	hA := regexp.MustCompile(`host-[0-9a-f]{12}`).FindString(outA)
	if hA == "" || !strings.Contains(outB, hA) {
		t.Errorf("hostname tokens differ: %s / %s", outA, outB)
	}
	// Each Writer reports its own mappings; the Redactor all of them.
	var buf bytes.Buffer
	w := a.NewWriter(&buf)
	_, _ = w.Write([]byte("fe80::1ff:fe23:4567:890a\n"))
	_ = w.Close()
	if len(w.Mappings()) != 1 || len(a.Mappings()) != 3 {
		t.Errorf("writer mappings %v, redactor mappings %v", w.Mappings(), a.Mappings())
	}
}

// TestObfuscationAcrossProcesses runs the same Settings, passed as JSON
// the way the supervisor passes them, in a child process and compares.
func TestObfuscationAcrossProcesses(t *testing.T) {
	if os.Getenv("REDACT_TEST_CHILD") == "1" {
		var s Settings
		if err := json.NewDecoder(os.Stdin).Decode(&s); err != nil {
			t.Fatal(err)
		}
		r, err := s.Build()
		if err != nil {
			t.Fatal(err)
		}
		out, _ := r.String("peer 10.1.2.3 on node-b17 mac 02:42:ac:11:00:02")
		os.Stdout.WriteString("\nRESULT:" + out + "\n")
		return
	}
	cfg, err := ParseConfig([]byte("rules:\n  - name: acme\n    literals: [acme-s3cret]\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := Settings{Config: cfg, Options: Options{Obfuscate: []string{"ip", "hostname", "mac"}, Key: testKey, Hostnames: []string{"node-b17"}}}
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestObfuscationAcrossProcesses$")
	cmd.Env = append(os.Environ(), "REDACT_TEST_CHILD=1")
	cmd.Stdin = bytes.NewReader(raw)
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, outb)
	}
	i := bytes.Index(outb, []byte("RESULT:"))
	if i < 0 {
		t.Fatalf("child printed no result: %s", outb)
	}
	child := string(bytes.SplitN(outb[i+7:], []byte("\n"), 2)[0])
	r, err := s.Build()
	if err != nil {
		t.Fatal(err)
	}
	here, _ := r.String("peer 10.1.2.3 on node-b17 mac 02:42:ac:11:00:02")
	if child != here || strings.Contains(here, "10.1.2.3") {
		t.Errorf("child %q, here %q", child, here)
	}
}

func TestObfuscationOptionsErrors(t *testing.T) {
	if _, err := Build(nil, Options{Obfuscate: []string{"ip"}}); !errors.Is(err, ErrNoKey) {
		t.Errorf("no key: %v", err)
	}
	if _, err := Build(nil, Options{Obfuscate: []string{"ipv9"}, Key: testKey}); err == nil || !strings.Contains(err.Error(), `"ipv9"`) {
		t.Errorf("bad category: %v", err)
	}
	// Obfuscation off: no mappings, no obfuscation counters.
	r := Default()
	out, c := r.String("10.0.0.1 02:42:ac:11:00:02")
	if out != "10.0.0.1 02:42:ac:11:00:02" || len(c) != 0 || len(r.Mappings()) != 0 {
		t.Errorf("obfuscated without being asked: %q %v", out, c)
	}
	k, err := NewKey()
	if err != nil || len(k) != 32 {
		t.Errorf("NewKey: %v %d", err, len(k))
	}
}
