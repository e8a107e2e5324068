"""The wheel is self-contained (issue 16, item 5): the extension ``luminal._C`` needs, besides torch's own
libraries, only what every manylinux system has. It once needed libzip (and through it libcrypto, libbz2
and libz), which a fresh environment with only torch does not have; a regression fails here.

The dynamic section is read from the ELF file itself, so the check needs no binutils.
"""

from __future__ import annotations

import re
import struct
import sys
from pathlib import Path

import pytest

import luminal._C

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "build_metadata"))
from luminal_torch_requirement import torch_requirement  # noqa: E402

# torch's libraries (the wheel requires torch), and the system libraries every manylinux platform
# provides (PEP 600's allow-list, the part a C++ extension can use).
ALLOWED = re.compile(
    r"^(libtorch(_cpu|_cuda|_python|_global_deps)?\.so|libc10(_cuda)?\.so"
    r"|libstdc\+\+\.so\.6|libgcc_s\.so\.1|libm\.so\.6|libc\.so\.6|libdl\.so\.2|librt\.so\.1|libpthread\.so\.0"
    r"|ld-linux-x86-64\.so\.2|ld-linux-aarch64\.so\.1)$"
)

SHT_DYNAMIC = 6
DT_NEEDED = 1


def needed_libraries(path: Path) -> list[str]:
    """The DT_NEEDED entries of a 64-bit little-endian ELF shared object."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, f"{path} is not a 64-bit little-endian ELF"
    section_offset = struct.unpack_from("<Q", data, 0x28)[0]
    entry_size, count = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, section_offset + i * entry_size) for i in range(count)]
    dynamic = [s for s in sections if s[1] == SHT_DYNAMIC]
    assert len(dynamic) == 1, f"{path}: expected one dynamic section, found {len(dynamic)}"
    _, _, _, _, offset, size, link, _, _, _ = dynamic[0]
    strings = sections[link][4]  # the dynamic string table's file offset
    names = []
    for at in range(offset, offset + size, 16):
        tag, value = struct.unpack_from("<qQ", data, at)
        if tag == 0:  # DT_NULL ends the table
            break
        if tag == DT_NEEDED:
            end = data.index(b"\0", strings + value)
            names.append(data[strings + value : end].decode())
    return names


def test_extension_needs_only_torch_and_manylinux_system_libraries() -> None:
    extension = Path(luminal._C.__file__)
    needed = needed_libraries(extension)
    assert any(name.startswith("libc.so") for name in needed), needed  # the parser found the real list
    assert not [name for name in needed if "zip" in name], f"{extension.name} NEEDs libzip: {needed}"
    unexpected = [name for name in needed if not ALLOWED.match(name)]
    assert not unexpected, (
        f"{extension.name} NEEDs {unexpected}, which neither torch nor every manylinux system provides: "
        "link it statically or drop it (the wheel must install into an environment with only torch)"
    )


def test_elf_reader_finds_a_known_dependency() -> None:
    """The reader against a file whose dependencies are known: the Python extension of torch."""
    import torch._C

    needed = needed_libraries(Path(torch._C.__file__))
    assert "libtorch_python.so" in needed, needed


@pytest.mark.parametrize(
    ("version", "requirement"),
    [
        ("2.15.0+cu132", "torch>=2.15.0,<2.16"),
        ("2.11.0", "torch>=2.11.0,<2.12"),
        ("2.9.1+cpu", "torch>=2.9.1,<2.10"),
        ("3.0.0", "torch>=3.0.0,<3.1"),
    ],
)
def test_wheel_requires_the_torch_minor_release_it_was_built_with(version: str, requirement: str) -> None:
    assert torch_requirement(version) == requirement
