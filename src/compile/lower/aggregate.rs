//! The aggregations (`count() sum(x) ... quantiles(x)`) as the right side of a map assignment.
use super::*;
use crate::builtins::Aggregation;

impl Lowerer<'_> {
    /// `count()`, `hist(x)`, ... as the right side of a map assignment.
    pub(crate) fn aggregation(&mut self, rhs: &RExpr) -> Result<Option<(AggOp, Option<Expr>)>> {
        let RExpr::FnCall(call, pos) = rhs else { return Ok(None) };
        let Some(row) = crate::builtins::aggregation(call.name.as_str()) else { return Ok(None) };
        let args = &call.args;
        let want = |n: usize| -> Result<()> {
            if args.len() != n {
                return err(*pos, format!("{}() takes {n} argument(s)", call.name));
            }
            Ok(())
        };
        let op = match row.aggregation {
            Aggregation::Count => {
                want(0)?;
                return Ok(Some((AggOp::Count, None)));
            }
            Aggregation::Sum => AggOp::Sum,
            Aggregation::Min => AggOp::Min,
            Aggregation::Max => AggOp::Max,
            Aggregation::Avg => AggOp::Avg,
            Aggregation::Stats => AggOp::Stats,
            Aggregation::Hist => {
                let bits = match args.len() {
                    1 => 0,
                    2 => match self.const_int(&args[1]) {
                        Some(k @ 0..=5) => k as u8,
                        _ => return err(*pos, "hist(value, bits): bits must be a constant from 0 to 5"),
                    },
                    _ => return err(*pos, "hist(value[, bits]) takes 1 or 2 arguments"),
                };
                let v = self.int_expr(&args[0])?;
                let op = if bits == 0 { AggOp::Hist } else { AggOp::HistBits { bits } };
                return Ok(Some((op, Some(v))));
            }
            Aggregation::Lhist => {
                want(4)?;
                let c: Vec<Option<i64>> = args[1..].iter().map(|a| self.const_int(a)).collect();
                let (Some(min), Some(max), Some(step)) = (c[0], c[1], c[2]) else {
                    return err(*pos, "lhist(value, min, max, step) needs constant min, max and step");
                };
                if step <= 0 || max <= min {
                    return err(*pos, "lhist needs min < max and step > 0");
                }
                if (max - min) / step > 1000 {
                    return err(*pos, "lhist would have more than 1000 buckets; use a larger step");
                }
                let v = self.int_expr(&args[0])?;
                return Ok(Some((AggOp::Lhist { min, max, step }, Some(v))));
            }
            Aggregation::Quantiles => {
                let unit_ns = match args.len() {
                    1 => 0,
                    2 => crate::compile::maps::quantiles_unit(&args[1]).or_else(|e| err(*pos, e))?,
                    _ => return err(*pos, "quantiles(value[, unit]) takes 1 or 2 arguments"),
                };
                let v = self.int_expr(&args[0])?;
                return Ok(Some((AggOp::Quantiles { unit_ns }, Some(v))));
            }
        };
        want(1)?;
        let v = self.int_expr(&args[0])?;
        Ok(Some((op, Some(v))))
    }
}
