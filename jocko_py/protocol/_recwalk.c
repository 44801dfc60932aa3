/* Native form of the produce path's record-structure walk (records.py,
 * validate_record_structure): the only per-record work on produce, done in C so
 * that it costs nanoseconds per record instead of a Python loop iteration.
 *
 * walk(buffer, require_keys) -> (err, n, bad_length, remaining)
 *   buffer: the (decompressed) records of one batch, any contiguous bytes-like
 *   err: 0 ok; 1 varint runs past the end; 2 varint too long;
 *        3 a record length <= 0 or beyond the end (bad_length holds it);
 *        4 a record without a key (require_keys only)
 *   n: records walked before the end or the error
 *   remaining: bytes left after the length prefix of the record being read when
 *        err is 3 or 4 or a key-check varint failed; 0 otherwise
 * The Python fallback in records.py has exactly these semantics; a test checks
 * that both agree on valid and corrupt input.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static int read_varint(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end,
                       int max_bytes, long long *out)
{
    unsigned long long result = 0;
    int shift = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (*pos >= end)
            return 1;
        unsigned char b = p[(*pos)++];
        result |= (unsigned long long)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *out = (long long)(result >> 1) ^ -(long long)(result & 1);
            return 0;
        }
        shift += 7;
    }
    return 2;
}

static PyObject *walk(PyObject *self, PyObject *args)
{
    Py_buffer view;
    int require_keys = 0;
    if (!PyArg_ParseTuple(args, "y*p", &view, &require_keys))
        return NULL;
    const unsigned char *p = (const unsigned char *)view.buf;
    Py_ssize_t end = view.len, pos = 0;
    long long n = 0, bad_length = 0;
    int err = 0, length_err = 0;
    while (pos < end) {
        long long length;
        err = read_varint(p, &pos, end, 5, &length);
        if (err) {
            length_err = 1;
            break;
        }
        if (length <= 0 || length > (long long)(end - pos)) {
            err = 3;
            bad_length = length;
            break;
        }
        if (require_keys) {
            /* attributes int8, timestampDelta varlong, offsetDelta varint, keyLength */
            Py_ssize_t q = pos + 1, rec_end = pos + (Py_ssize_t)length;
            long long skip, key_length;
            err = read_varint(p, &q, rec_end, 10, &skip);
            if (!err)
                err = read_varint(p, &q, rec_end, 5, &skip);
            if (!err)
                err = read_varint(p, &q, rec_end, 5, &key_length);
            if (err)
                break;
            if (key_length < 0) {
                err = 4;
                break;
            }
        }
        pos += (Py_ssize_t)length;
        n++;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(iLLn)", err, n, bad_length,
                         (err == 0 || length_err) ? (Py_ssize_t)0 : end - pos);
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, "Walk the length-prefixed records of one batch."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_recwalk", "Native record-structure walk.", -1, methods,
};

PyMODINIT_FUNC PyInit__recwalk(void) { return PyModule_Create(&module); }
