# The byte helpers every compiled twin shares (included by each package's _compiled.pyx):
# big-endian loads and stores of int32 / int64 fields, as the RocketMQ layouts write them.

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t


cdef inline int32_t _i32(const uint8_t* p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16)
                     | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


cdef inline int64_t _i64(const uint8_t* p) noexcept nogil:
    return <int64_t>((<uint64_t><uint32_t>_i32(p) << 32) | <uint64_t><uint32_t>_i32(p + 4))


cdef inline void _put32(uint8_t* p, int64_t value) noexcept nogil:
    """The low 32 bits of ``value``, big-endian (an int32 or a uint32 field)."""
    cdef uint32_t v = <uint32_t>value
    p[0] = <uint8_t>(v >> 24)
    p[1] = <uint8_t>(v >> 16)
    p[2] = <uint8_t>(v >> 8)
    p[3] = <uint8_t>v


cdef inline void _put64(uint8_t* p, int64_t value) noexcept nogil:
    _put32(p, <int64_t>(<uint64_t>value >> 32))
    _put32(p + 4, value)
