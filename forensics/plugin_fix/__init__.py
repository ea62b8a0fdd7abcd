"""The kfpytorch plugin fix: the bundled patch, applying it by syntax, checking trees and envs, wheels."""
