package outputdir

import (
	"fmt"
	"io"
	"strings"

	"filippo.io/age"
	"filippo.io/age/agessh"
)

// ParseRecipients parses the recipients of --encrypt-to: age public keys
// (age1…, including the post-quantum age1pq1…) and SSH public keys
// (ssh-ed25519, ssh-rsa: what a support engineer already has in
// ~/.ssh/id_*.pub or on GitHub), one a value. Encryption itself is age's
// (filippo.io/age), never code of ours.
func ParseRecipients(specs []string) ([]age.Recipient, error) {
	var out []age.Recipient
	for _, s := range specs {
		s = strings.TrimSpace(s)
		var r age.Recipient
		var err error
		switch {
		case strings.HasPrefix(s, "age1"):
			var rs []age.Recipient
			rs, err = age.ParseRecipients(strings.NewReader(s))
			if err == nil {
				r = rs[0]
			}
		case strings.HasPrefix(s, "ssh-"):
			r, err = agessh.ParseRecipient(s)
		case strings.HasPrefix(s, "AGE-SECRET-KEY-"):
			return nil, fmt.Errorf("--encrypt-to takes the recipient's public key (age1…), not a secret key: keep that one private")
		default:
			err = fmt.Errorf("not an age (age1…) or SSH (ssh-ed25519 …, ssh-rsa …) public key")
		}
		if err != nil {
			return nil, fmt.Errorf("--encrypt-to %q: %w", shorten(s), err)
		}
		out = append(out, r)
	}
	return out, nil
}

// encryptor is the bundle.WriteOptions.Encrypt of recipients rs.
func encryptor(rs []age.Recipient) func(io.Writer) (io.WriteCloser, error) {
	return func(w io.Writer) (io.WriteCloser, error) { return age.Encrypt(w, rs...) }
}

func shorten(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}
