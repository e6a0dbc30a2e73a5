package lab

import (
	"context"
	"errors"
	"sync"

	"kbisect/kbuild"
)

// UnderWay is what the pipelines of several machines are building now,
// each in its own slot of one cache: a pipeline that needs a kernel
// another is building waits for that build and takes the kernel from
// the cache, instead of building it a second time beside it (the
// posterior search on several machines may boot one commit on two at
// once). A kernel that did not build is not built again. The zero value
// is ready to use.
type UnderWay struct {
	mu     sync.Mutex
	builds map[string]chan struct{}
	failed map[string]*kbuild.BuildError
}

// claim is the pipeline's turn to build commit: it waits while another
// pipeline builds it, and then returns that build's failure (when it did
// not build) or a release to call once its own build ended.
func (u *UnderWay) claim(ctx context.Context, commit string) (release func(err error), be *kbuild.BuildError, err error) {
	for {
		u.mu.Lock()
		if be := u.failed[commit]; be != nil {
			u.mu.Unlock()
			return nil, be, nil
		}
		done, busy := u.builds[commit]
		if !busy {
			if u.builds == nil {
				u.builds = map[string]chan struct{}{}
			}
			done = make(chan struct{})
			u.builds[commit] = done
			u.mu.Unlock()
			return func(err error) {
				u.mu.Lock()
				defer u.mu.Unlock()
				var be *kbuild.BuildError
				if errors.As(err, &be) {
					if u.failed == nil {
						u.failed = map[string]*kbuild.BuildError{}
					}
					u.failed[commit] = be
				}
				delete(u.builds, commit)
				close(done)
			}, nil, nil
		}
		u.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}
