"""Open an mt stream as plain bytes: compressed ones (zstd frames, as
mt-encode writes by default) through the zstd CLI, an outside decoder."""
import io
import subprocess


def is_zstd(head):
    """A zstd frame (28 b5 2f fd) or a skippable frame (5X 2a 4d 18)."""
    return head[:4] == b"\x28\xb5\x2f\xfd" or (
        len(head) >= 4 and head[0] & 0xF0 == 0x50 and head[1:4] == b"\x2a\x4d\x18")


def open_plain(path):
    """A binary file object of path's plain bytes."""
    f = open(path, "rb")
    if not is_zstd(f.peek(4)[:4]):
        return f
    f.close()
    return io.BytesIO(subprocess.run(["zstd", "-dc", path], check=True,
                                     stdout=subprocess.PIPE).stdout)
