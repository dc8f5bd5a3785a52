package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/all"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/object"
	objall "github.com/sluicefs/sluice/internal/object/all"
	"github.com/sluicefs/sluice/internal/object/compress"
	"github.com/sluicefs/sluice/internal/object/encrypt"
	"github.com/sluicefs/sluice/internal/object/prefix"
)

// metaTimeoutUsage describes --meta-timeout of the commands that work on a
// volume without mounting it.
const metaTimeoutUsage = "longest the metadata engine may take to open, and to answer each transaction (retries included), before the command fails (seconds or a duration; 0: wait for ever)"

// openVolume opens the metadata engine at metaURL and reads the volume
// settings it holds. A timeout above 0 (--meta-timeout) bounds the
// opening, and each transaction of the returned store (meta.Bound), so
// that a command on an engine that stops answering fails instead of
// hanging.
func openVolume(ctx context.Context, metaURL string, timeout time.Duration) (store.Store, *meta.Format, error) {
	octx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		octx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	st, err := all.Open(octx, metaURL, false)
	if err != nil {
		if octx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w (not open within --meta-timeout %v)", err, timeout)
		}
		return nil, nil, err
	}
	st = meta.Bound(st, timeout)
	f, err := meta.Load(ctx, st)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, f, nil
}

// openVolumeData opens the metadata engine at metaURL (bounded by
// timeout as in openVolume), the volume settings and the volume's data as
// it is laid out in the bucket (volumeStore). The caller closes the store.
func openVolumeData(ctx context.Context, metaURL string, timeout time.Duration) (store.Store, *meta.Format, object.Store, error) {
	st, f, err := openVolume(ctx, metaURL, timeout)
	if err != nil {
		return nil, nil, nil, err
	}
	bucket, err := openBucket(f)
	if err == nil {
		var obj object.Store
		if obj, err = volumeStore(bucket, f); err == nil {
			return st, f, obj, nil
		}
	}
	st.Close()
	return nil, nil, nil, err
}

// openBucket opens the volume's raw bucket, without prefix or compression,
// with the stored keys; the environment variables ACCESS_KEY, SECRET_KEY
// and SESSION_TOKEN override them when set.
func openBucket(f *meta.Format) (object.Store, error) {
	c := credentials{accessKey: f.AccessKey, secretKey: f.SecretKey, sessionToken: f.SessionToken}.envOverride()
	s, err := objall.Open(f.Storage, f.Bucket, objall.Options{
		AccessKey: c.accessKey, SecretKey: c.secretKey, SessionToken: c.sessionToken})
	if err != nil {
		return nil, fmt.Errorf("object storage: %w", err)
	}
	return s, nil
}

// volumeStore wraps a bucket the way the volume's data is laid out: every
// key under "NAME/", blocks compressed as the volume says, then encrypted
// when the volume has a key.
func volumeStore(bucket object.Store, f *meta.Format) (object.Store, error) {
	s := prefix.New(bucket, f.Name+"/")
	if f.EncryptKey != "" {
		key, err := encrypt.ParsePrivateKey([]byte(f.EncryptKey), []byte(os.Getenv(encrypt.PassphraseEnv)))
		if err != nil {
			if f.KeyEncrypted && os.Getenv(encrypt.PassphraseEnv) == "" {
				return nil, fmt.Errorf("the volume's encryption key is protected by a passphrase: set %s", encrypt.PassphraseEnv)
			}
			return nil, fmt.Errorf("the volume's encryption key: %w", err)
		}
		if s, err = encrypt.New(s, key, f.EncryptAlgo); err != nil {
			return nil, err
		}
	}
	return compress.New(s, f.Compression)
}
