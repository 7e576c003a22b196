/// Whether a stream carries documents' values, or keys and metadata only (DCP's NoValue
/// open flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeValue {
    #[default]
    Yes,
    No,
}
