import './base.css';
import './celledits.css';
