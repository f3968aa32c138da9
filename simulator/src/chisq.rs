//! The chi-square test of equal shares: whether classes of joiners (by join time, by
//! polling rate, people and bots) won the same share of what they joined for, with the
//! statistic's p-value and its critical value at p = 0.01.

use serde::Serialize;

/// The significance level the report gives the critical value at.
pub const ALPHA: f64 = 0.01;

/// A chi-square test of equal shares.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ChiSquare {
    pub statistic: f64,
    pub dof: u32,
    /// The chance of a statistic at least this large if the shares were equal.
    pub p_value: f64,
    /// The statistic beyond which equal shares are rejected at p = 0.01.
    pub critical_p01: f64,
}

/// The chance that a chi-square variable with `dof` degrees of freedom is at least `x`:
/// the regularised upper incomplete gamma function Q(dof/2, x/2).
pub fn p_value(x: f64, dof: u32) -> f64 {
    if dof == 0 || x <= 0.0 {
        return 1.0;
    }
    gamma_q(f64::from(dof) / 2.0, x / 2.0)
}

/// The statistic whose p-value is `p`, by bisection.
pub fn critical(p: f64, dof: u32) -> f64 {
    if dof == 0 {
        return 0.0;
    }
    let k = f64::from(dof);
    let (mut lo, mut hi) = (0.0, k + 20.0 * (2.0 * k).sqrt() + 50.0);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if p_value(mid, dof) > p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// ln Γ(x), x > 0 (Lanczos, g = 7, 9 terms: 15 significant digits).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 − x) = π / sin(πx).
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let t = x + 7.5;
    let sum = G[1..]
        .iter()
        .enumerate()
        .fold(G[0], |s, (i, g)| s + g / (x + i as f64 + 1.0));
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

/// Q(a, x) = Γ(a, x) / Γ(a): by its series below a + 1, by its continued fraction above
/// (Numerical Recipes, 6.2).
fn gamma_q(a: f64, x: f64) -> f64 {
    let front = (-x + a * x.ln() - ln_gamma(a)).exp();
    if x < a + 1.0 {
        let (mut term, mut sum, mut n) = (1.0 / a, 1.0 / a, a);
        for _ in 0..1000 {
            n += 1.0;
            term *= x / n;
            sum += term;
            if term.abs() < sum.abs() * 1e-16 {
                break;
            }
        }
        (1.0 - sum * front).clamp(0.0, 1.0)
    } else {
        // Lentz's method.
        let tiny = 1e-300;
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / tiny;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..1000 {
            let an = -f64::from(i) * (f64::from(i) - a);
            b += 2.0;
            d = an * d + b;
            d = if d.abs() < tiny { tiny } else { d };
            c = b + an / c;
            c = if c.abs() < tiny { tiny } else { c };
            d = 1.0 / d;
            let step = d * c;
            h *= step;
            if (step - 1.0).abs() < 1e-16 {
                break;
            }
        }
        (front * h).clamp(0.0, 1.0)
    }
}

/// The chi-square test that every class won the same share: classes of `(joined, won)`,
/// against the share all of them won together (the homogeneity test of a 2 × k table,
/// k − 1 degrees of freedom; empty classes left out).
pub fn equal_shares(classes: &[(u64, u64)]) -> ChiSquare {
    let classes: Vec<(f64, f64)> = classes
        .iter()
        .filter(|(joined, _)| *joined > 0)
        .map(|(j, w)| (*j as f64, *w as f64))
        .collect();
    let dof = classes.len().saturating_sub(1) as u32;
    let joined: f64 = classes.iter().map(|c| c.0).sum();
    let won: f64 = classes.iter().map(|c| c.1).sum();
    let share = if joined > 0.0 { won / joined } else { 0.0 };
    let statistic = if share > 0.0 && share < 1.0 {
        classes
            .iter()
            .map(|(n, w)| {
                let (win, lose) = (n * share, n * (1.0 - share));
                (w - win).powi(2) / win + ((n - w) - lose).powi(2) / lose
            })
            .sum()
    } else {
        // Everyone won, or nobody did: the shares are equal.
        0.0
    };
    ChiSquare {
        statistic,
        dof,
        p_value: p_value(statistic, dof),
        critical_p01: critical(ALPHA, dof),
    }
}

impl ChiSquare {
    /// The test as a line of the report.
    pub fn line(&self) -> String {
        let p = if self.p_value >= 0.001 {
            format!("{:.3}", self.p_value)
        } else {
            format!("{:.1e}", self.p_value)
        };
        format!(
            "chi-square {:.2}, {} dof, p {p} (critical at p=0.01: {:.2}): {}",
            self.statistic,
            self.dof,
            self.critical_p01,
            if self.statistic < self.critical_p01 {
                "equal shares hold"
            } else {
                "UNEQUAL shares"
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance
    }

    #[test]
    fn p_values_match_the_tables() {
        // Critical values at p = 0.05 and 0.01 from the standard tables.
        for (x, dof, p) in [
            (3.841_458_820_694_124, 1, 0.05),
            (6.634_896_601_021_214, 1, 0.01),
            (5.991_464_547_107_979, 2, 0.05),
            (16.918_977_604_620_45, 9, 0.05),
            (21.665_994_333_461_92, 9, 0.01),
            (37.566_234_786_625_2, 20, 0.01),
        ] {
            let got = p_value(x, dof);
            assert!(close(got, p, 1e-9), "p({x}, {dof}) = {got}, not {p}");
        }
        // Two degrees of freedom: Q(1, x/2) = e^(−x/2) exactly; across the series and
        // the continued fraction.
        for x in [0.1, 1.0, 2.9, 3.1, 10.0, 40.0] {
            assert!(close(p_value(x, 2), (-x / 2.0).exp(), 1e-12), "{x}");
        }
        assert_eq!(p_value(0.0, 3), 1.0);
        assert_eq!(p_value(5.0, 0), 1.0);
        assert!(p_value(500.0, 9) < 1e-90);
    }

    #[test]
    fn critical_values_match_the_tables() {
        for (dof, x) in [
            (1, 6.634_896_601_021_214),
            (2, 9.210_340_371_976_184),
            (9, 21.665_994_333_461_92),
            (20, 37.566_234_786_625_2),
        ] {
            let got = critical(0.01, dof);
            assert!(close(got, x, 1e-6), "critical({dof}) = {got}, not {x}");
        }
    }

    #[test]
    fn equal_shares_test_a_two_by_k_table() {
        // Worked by hand: 100 joined and 50 won against 100 and 30: overall 0.4, so 40
        // won and 60 lost expected in each; (10²/40 + 10²/60) × 2 = 8.33.
        let t = equal_shares(&[(100, 50), (100, 30)]);
        assert!(close(t.statistic, 25.0 / 3.0, 1e-9), "{t:?}");
        assert_eq!(t.dof, 1);
        assert!(t.p_value < 0.01 && t.statistic > t.critical_p01);
        // The same share everywhere: nothing to see; empty classes do not count.
        let t = equal_shares(&[(40, 10), (80, 20), (0, 0), (120, 30)]);
        assert!(close(t.statistic, 0.0, 1e-12));
        assert_eq!((t.dof, t.p_value), (2, 1.0));
        // Everyone won: equal shares.
        assert_eq!(equal_shares(&[(5, 5), (7, 7)]).statistic, 0.0);
        assert_eq!(equal_shares(&[]).dof, 0);
    }
}
