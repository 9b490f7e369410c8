package pb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/superpeer/superpeer/classic"
)

// WriteMsg writes m to w as one frame: the length of its encoding as an
// unsigned varint, then the encoding (see Marshal), in a single Write. Errors
// are Marshal's, or w's wrapped.
func WriteMsg(w io.Writer, m classic.Message) error {
	n, err := checkedSize(m)
	if err != nil {
		return err
	}
	b := protowire.AppendVarint(make([]byte, 0, protowire.SizeVarint(uint64(n))+n), uint64(n))
	b = appendMsg(b, m)
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("classic/pb: writing %s message: %w", m.Type, err)
	}
	return nil
}

// ReadMsg reads one frame written by WriteMsg from r and decodes it with
// Unmarshal(body, from). It reads exactly the frame's bytes and no more, so
// it can be called again on the same stream for the next message; r need not
// be buffered (if r is an io.ByteReader the length prefix is read through
// it, else one byte per Read).
//
// It returns io.EOF, unwrapped, when r ends before the first byte of a frame:
// the peer closed the stream between messages. A length prefix above MaxSize
// is refused with ErrTooLarge before the body is allocated or read; the stream
// is then out of step and must be reset. A stream that ends inside a frame
// gives ErrMalformed (wrapping io.ErrUnexpectedEOF); other read errors are
// returned wrapped. When Unmarshal fails the whole frame has been consumed,
// so the next frame can still be read.
func ReadMsg(r io.Reader, from classic.ID) (classic.Message, error) {
	if from == classic.None {
		return classic.Message{}, fmt.Errorf("%w: ReadMsg needs the authenticated peer the stream comes from", ErrSender)
	}
	br, ok := r.(io.ByteReader)
	if !ok {
		br = &byteReader{r: r}
	}
	n, err := readLength(br)
	if err != nil {
		return classic.Message{}, err
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return classic.Message{}, fmt.Errorf("%w: stream ended inside a %d-byte frame: %w", ErrMalformed, n, io.ErrUnexpectedEOF)
		}
		return classic.Message{}, fmt.Errorf("classic/pb: reading a %d-byte frame: %w", n, err)
	}
	return Unmarshal(body, from)
}

// readLength reads a frame's length prefix: an unsigned varint of at most
// binary.MaxVarintLen64 bytes. It stops with ErrTooLarge as soon as the value
// read so far exceeds MaxSize, and returns io.EOF, unwrapped, only when br
// ends before the first byte.
func readLength(br io.ByteReader) (uint64, error) {
	var x uint64
	for i := range binary.MaxVarintLen64 {
		c, err := br.ReadByte()
		switch {
		case err == io.EOF && i == 0:
			return 0, io.EOF
		case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
			return 0, fmt.Errorf("%w: stream ended inside a frame's length prefix: %w", ErrMalformed, io.ErrUnexpectedEOF)
		case err != nil:
			return 0, fmt.Errorf("classic/pb: reading a frame's length: %w", err)
		}
		if i == binary.MaxVarintLen64-1 && c > 1 {
			return 0, fmt.Errorf("%w: frame length prefix overflows 64 bits", ErrMalformed)
		}
		x |= uint64(c&0x7f) << (7 * i)
		if x > MaxSize {
			return 0, fmt.Errorf("%w: frame announces more than MaxSize = %d bytes", ErrTooLarge, MaxSize)
		}
		if c < 0x80 {
			return x, nil
		}
	}
	return 0, fmt.Errorf("%w: frame length prefix runs past %d bytes", ErrMalformed, binary.MaxVarintLen64)
}

// byteReader reads one byte at a time from an io.Reader without buffering,
// so that nothing past the length prefix is consumed.
type byteReader struct {
	r   io.Reader
	buf [1]byte
}

func (b *byteReader) ReadByte() (byte, error) {
	if _, err := io.ReadFull(b.r, b.buf[:]); err != nil {
		return 0, err
	}
	return b.buf[0], nil
}
