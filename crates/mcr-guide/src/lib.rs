#![doc = include_str!("../chapters/00-introduction.md")]

pub mod ch12_recipe_sync_secrets {
    #![doc = include_str!("../chapters/12-recipe-sync-secrets.md")]
}
