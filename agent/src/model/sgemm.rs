//! The one call into matrixmultiply's raw-pointer sgemm, behind a safe, bounds-checked
//! function: the only `unsafe` of the pure-Rust inference.
//!
//! # Safety
//!
//! `matrixmultiply::sgemm` reads and writes through raw pointers with the dimensions
//! and strides it is given. [`add_x_wt`] describes `x` (`n x k`, row-major), `w` read
//! as its transpose (`k x m`: row stride 1, column stride `k`) and `y` (`n x m`,
//! row-major); the largest element each description touches is `n*k - 1`, `m*k - 1`
//! and `n*m - 1`, and the function checks (with overflow-checked products, on every
//! call, before the call) that the slices are at least that long. `y` is `&mut` and
//! `x`, `w` are `&`, so the output overlaps neither input.
#![allow(unsafe_code)]

/// `y[n, m] += x[n, k] . w[m, k]^T`: every matrix row-major, `w` as PyTorch stores a
/// linear layer's weight (`[out, in]`). Panics if a slice is shorter than its shape.
pub(super) fn add_x_wt(x: &[f32], w: &[f32], y: &mut [f32], n: usize, k: usize, m: usize) {
    let holds = |len: usize, rows: usize, cols: usize| rows.checked_mul(cols).is_some_and(|need| len >= need);
    assert!(holds(x.len(), n, k) && holds(w.len(), m, k) && holds(y.len(), n, m), "sgemm: slices shorter than their shapes");
    // SAFETY: the module doc: the three descriptions stay inside the checked lengths.
    unsafe {
        matrixmultiply::sgemm(n, k, m, 1.0, x.as_ptr(), k as isize, 1, w.as_ptr(), 1, k as isize, 1.0, y.as_mut_ptr(), m as isize, 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_the_product_with_the_transposed_weight() {
        // x [2, 3], w [4, 3] (out 4, in 3), y starts at 1: y = 1 + x . w^T.
        let x = [1.0, 2.0, 3.0, -1.0, 0.5, 2.0];
        let w = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0];
        let mut y = [1.0f32; 8];
        add_x_wt(&x, &w, &mut y, 2, 3, 4);
        assert_eq!(y, [2.0, 3.0, 4.0, 7.0, 0.0, 1.5, 3.0, 2.5]);
    }

    #[test]
    fn short_slices_are_refused_before_the_call() {
        let (x, w) = ([0.0f32; 6], [0.0f32; 12]);
        for (xl, wl, yl) in [(5, 12, 8), (6, 11, 8), (6, 12, 7)] {
            let mut y = vec![0.0f32; yl];
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| add_x_wt(&x[..xl], &w[..wl], &mut y, 2, 3, 4)));
            assert!(r.is_err(), "x {xl}, w {wl}, y {yl}");
        }
        let mut y = [0.0f32; 1];
        let huge = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| add_x_wt(&[], &[], &mut y, usize::MAX, 2, 1)));
        assert!(huge.is_err(), "an overflowing shape");
    }
}
