"""Compiled twin of :func:`bolide.client.producer.results.settle_batch` (Cython).

Same signature, results and errors as the pure-Python function, which is the reference;
``tests/client/test_results_twins.py`` holds them alike. Each SendResult is made
without the frozen dataclass's ``__init__``: its slots are set by the generic setattr, which
goes to the slot itself (the class's own ``__setattr__`` refuses, being frozen).
"""

from bolide.base.errors import ProtocolError

cdef extern from "Python.h":
    int PyObject_GenericSetAttr(object target, object name, object value) except -1

cdef object _result_class = None
cdef object _new_object = object.__new__


cdef object _send_result_class():
    """SendResult, imported at the first call (results.py imports this module at its end)."""
    global _result_class
    if _result_class is None:
        from bolide.client.message import SendResult
        _result_class = SendResult
    return _result_class


def settle_batch(
    group,
    offset_msg_ids,
    status,
    queue,
    first_queue_offset,
    transaction_id,
    region_id,
):
    """Set the result of every waiting send of ``group``; see the pure twin."""
    cdef list offset_ids = offset_msg_ids.split(",")
    cdef Py_ssize_t count = len(group)
    cdef Py_ssize_t index
    if len(offset_ids) != count:
        raise ProtocolError(
            f"the broker answered a batch of {count} messages with"
            f" {len(offset_ids)} message ids; the messages were stored"
        )
    result_class = _send_result_class()
    queue_offset = first_queue_offset
    for index in range(count):
        waiting = group[index]
        future = waiting.future
        if not future.done():
            result = _new_object(result_class)
            PyObject_GenericSetAttr(result, "status", status)
            PyObject_GenericSetAttr(result, "msg_id", waiting.msg_id)
            PyObject_GenericSetAttr(result, "offset_msg_id", offset_ids[index])
            PyObject_GenericSetAttr(result, "queue", queue)
            PyObject_GenericSetAttr(result, "queue_offset", queue_offset)
            PyObject_GenericSetAttr(result, "transaction_id", transaction_id)
            PyObject_GenericSetAttr(result, "region_id", region_id)
            PyObject_GenericSetAttr(result, "recall_handle", None)  # batches are never timed
            future.set_result(result)
        queue_offset = queue_offset + 1
