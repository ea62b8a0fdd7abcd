"""The kfpytorch plugin fix: the patch, applying it by syntax, checking trees and envs, wheels."""
