// Package commitid owns how kbisect shows a commit hash to people: the
// first 12 hex digits, as git log --abbrev=12 does, the one width every
// message, report and kernel release name uses. It imports no kbisect
// package, so that any package may use it, report included.
package commitid

// Width is how many hex digits Short keeps.
const Width = 12

// Short is the 12-hex-digit form of a commit hash (or of any hex digest
// shown beside one, such as a kernel's signature); shorter strings come
// back as they are.
func Short(hash string) string {
	if len(hash) > Width {
		return hash[:Width]
	}
	return hash
}
